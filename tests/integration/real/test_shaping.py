"""A shaped target through the whole real stack: MariaDB's rows, from before Canal's start (the snapshot brings them)
and streamed, into a target that leaves a column out, masks one, partitions by a computed one, keeps the rows a
filter takes, records each row's last change and keeps deleted rows marked, while updates move rows out of and
back into the filter and across partitions (its equality deletes apply in every partition). The daemon is
SIGKILLed once a snapshot chunk is handed over, and DDL changes a masked and an excluded column. The target is
checked against MariaDB's rows shaped here, with Python's own HMAC, at the end; then a DDL renames the column the
computed one reads, and the job pauses naming the entry, with no row written after it."""

from __future__ import annotations

import hashlib
import hmac
import signal

import pytest

from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.model.position import EntryPosition
from spark_sink.identifiers import quote_table
from spark_sink.table import TargetTable
from tests.daemon_process import daemon_log, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination
from tests.integration.real.daemon_run import acked_through, write_daemon_config
from tests.integration.spark.test_equality_deletes import files_by_content

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.faults]

DB = "shaping"
SIGNALS = "canalbridge_signal"
TARGET = f"lake.real_{DB}.orders"
USER, PASSWORD = "shaper", "shaper-secret"
SALT = "the salt of the real shaping test"
STATUSES = ("new", "paid", "cancelled")
CHANNEL = f"""[[job.channel]]
source = "{DB}.orders"
target = "{TARGET}"
exclude = ["note"]
mask = ["email", "amount"]
row_filter = "status <> 'cancelled'"
partition_by = ["order_day"]
metadata = ["op", "source_time", "position", "table"]
deletes = "soft"
[job.channel.computed]
order_day = "to_date(created)"
"""


COLUMNS = "id, email, status, created, amount"


def masked(value: object) -> str:
    return hmac.new(SALT.encode(), str(value).encode(), hashlib.sha256).hexdigest()


def shaped(rows: list[tuple]) -> list[tuple]:
    """Orders (``COLUMNS``) as the shaping page says the target holds them."""
    return sorted((key, masked(email), status, created, masked(amount), created.date())
                  for key, email, status, created, amount in rows if status != "cancelled")


def target_rows(spark, deleted: bool = False) -> list[tuple]:
    """The target's rows of the source's columns, shaped; ``deleted``: those soft-deleted instead."""
    spark.sql(f"REFRESH TABLE {quote_table(TARGET)}")  # (the daemon, not this session, writes it)
    frame = spark.table(quote_table(TARGET)).where(f"_is_deleted = {str(deleted).lower()}")
    source = frame.columns[:len(COLUMNS.split(", "))]  # (by place: a DDL may rename one)
    return sorted(tuple(row) for row in frame.select(*source, "order_day").collect())


def logged(config, event: str) -> int:
    return daemon_log(config).count(f'"event": "{event}"')


@pytest.mark.timeout(900)
def test_a_shaped_target_through_a_snapshot_a_kill_and_ddl_equals_its_source_shaped(
        canal, mariadb, spark, spark_settings, tmp_path, monkeypatch):
    monkeypatch.setenv("CANALBRIDGE_MASK_SALT", SALT)  # (the daemon's environment: tests.daemon_process passes it)
    mariadb.create_database(DB)
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, email VARCHAR(64) NOT NULL, status VARCHAR(16), "
                    "note VARCHAR(32), created DATETIME NOT NULL, amount DECIMAL(10,2))",
                    SIGNAL_TABLE_DDL.format(table=SIGNALS),
                    "INSERT INTO orders VALUES " + ", ".join(
                        f"({key}, 'user{key}@example.com', '{STATUSES[key % 3]}', 'note {key}', "
                        f"'2026-12-0{1 + key % 4} 10:30:00', {key}.25)" for key in range(1, 201)), database=DB)
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))  # the stream starts after those rows
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, spark_settings.warehouse, CHANNEL)
    snapshot = (f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{USER}"\n'
                f'password = "{PASSWORD}"\nsignal_table = "{DB}.{SIGNALS}"\nchunk_rows = 40\nparallelism = 1\n')
    config.write_text(config.read_text().replace("[[job.channel]]", snapshot + "[[job.channel]]", 1))

    def acked_all() -> bool:
        return acked_through(config, EntryPosition(*mariadb.last_event_start("Xid")))

    with running_daemon(config) as daemon:
        # Rows leave the filter, come back into it, move to another day's partition; new rows, a delete.
        mariadb.execute("UPDATE orders SET status = 'cancelled' WHERE id % 7 = 0",
                        "UPDATE orders SET status = 'paid' WHERE status = 'cancelled' AND id % 5 = 0",
                        "UPDATE orders SET created = created + INTERVAL 1 DAY WHERE id % 4 = 1",
                        "INSERT INTO orders VALUES (201, 'late@example.com', 'new', 'n', '2026-12-09 08:00:00', 1.5)",
                        database=DB)
        gone = mariadb.execute(f"SELECT {COLUMNS} FROM orders WHERE id IN (2, 3)", database=DB)
        mariadb.execute("DELETE FROM orders WHERE id IN (2, 3)", database=DB)
        assert eventually(lambda: daemon.poll() is not None or logged(config, "channel.chunk") > 0, 300), (
            daemon_log(config)[-3000:])
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(60)
    assert not logged(config, "snapshot.finished"), "the kill came before the snapshot's end"

    with running_daemon(config) as daemon:
        mariadb.execute("ALTER TABLE orders MODIFY amount DECIMAL(12,2)",  # masked: stays a string, its text the same
                        "ALTER TABLE orders MODIFY note VARCHAR(64)",  # excluded: nothing to change
                        "UPDATE orders SET email = CONCAT('new-', email), status = 'paid' WHERE id % 6 = 0",
                        "UPDATE orders SET status = 'cancelled' WHERE id % 10 = 1", database=DB)
        assert eventually(lambda: daemon.poll() is not None or (
            logged(config, "snapshot.finished") > 0 and acked_all()), 300), job_status(config, "real")
        assert target_rows(spark) == shaped(mariadb.execute(f"SELECT {COLUMNS} FROM orders", database=DB))
        # Deleted rows stay, marked (but a cancelled one: the filter takes it out); the metadata columns say
        # what brought each row.
        assert target_rows(spark, deleted=True) == shaped(gone) and len(shaped(gone)) == 1
        assert spark.table(quote_table(TARGET)).columns == [
            "id", "email", "status", "created", "amount", "_source_table", "order_day", "_source_op",
            "_source_time", "_source_position", "_is_deleted", "_deleted_at"]
        ops = {row["id"]: (row["_source_op"], row["_source_table"], row["_source_position"]) for row in
               spark.table(quote_table(TARGET)).collect()}
        # (Rows the stream changed may be the snapshot's or the stream's, as their chunk's window fell.)
        untouched = [key for key in range(4, 201)
                     if key % 3 != 2 and key % 7 and key % 5 and key % 4 != 1 and key % 6 and key % 10 != 1]
        assert {ops[key][0] for key in untouched} == {"snapshot"}
        assert ops[3][0] == "delete" and {table for _, table, _ in ops.values()} == {"orders"}
        assert all(position.startswith("mysql-bin.") for _, _, position in ops.values()), ops
        assert [str(field) for field in TargetTable(spark, TARGET).partition_fields()] == ["order_day"]
        assert "equality deletes" in files_by_content(spark, TARGET)  # (the rows moved across partitions by them)

        # The column the computed one reads is renamed: the job pauses at the next commit, naming the entry.
        before = target_rows(spark)
        mariadb.execute("ALTER TABLE orders CHANGE created created_at DATETIME NOT NULL",
                        "UPDATE orders SET status = 'paid' WHERE id = 1", database=DB)

        def paused() -> dict | None:
            status = job_status(config, "real")
            return status if status and status["state"] == "PAUSED" else None

        assert eventually(lambda: daemon.poll() is not None or paused() is not None, 300), daemon_log(config)[-3000:]
        reason = paused()["fail_message"]["text"]
        assert "computed.order_day = 'to_date(created)' does not fit the rows" in reason, reason
        assert SALT not in daemon_log(config)
        stop(daemon, config)
    assert target_rows(spark) == before  # (the rename's DDL is in the target; no row after it)
