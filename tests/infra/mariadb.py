"""A private MariaDB for the real-stack tests: its own data directory, socket and loopback port.

It never touches the machine's own MariaDB service: ``mariadb-install-db``
and ``mariadbd`` run with a defaults file written here, so no system option
file is read. The binlog is on in ROW format with full row images, as Canal
needs. At first start it creates a ``canal`` replication user; root gets a
random password held only by this object (and never logged).
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from canalbridge.devkit.progress import die_with_parent
from tests.infra.artifacts import mariadb_binaries
from tests.infra.processes import (
    LOOPBACK,
    PORT_ATTEMPTS,
    PORT_TAKEN,
    ServiceError,
    ServiceProcess,
    free_port,
    read_from,
    tail,
    wait_for,
)
from tests.infra.tls import TlsFiles

# The grants Canal needs at connect time and for the binlog dump (MariaDB
# stores REPLICATION CLIENT as BINLOG MONITOR).
CANAL_GRANTS = "SELECT, REPLICATION SLAVE, REPLICATION CLIENT"


class MariaDBServer(ServiceProcess):
    """One private ``mariadbd`` under ``root_dir``; :meth:`start` again after :meth:`stop` keeps the data.

    ``canal_user`` / ``canal_password`` is the account Canal's parser logs
    in with. :meth:`connect` and :meth:`execute` run SQL as root over TCP.
    After :meth:`kill`, InnoDB recovers at the next start.
    """

    stop_timeout_s = 60.0

    def __init__(
        self,
        root_dir: Path,
        *,
        port: int = 0,
        canal_user: str = "canal",
        canal_password: str = "canal-db-secret",
        start_timeout_s: float = 90.0,
        extra_options: Sequence[str] = (),
        tls: TlsFiles | None = None,
    ) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.port = port or free_port()
        self._may_move = port == 0  # a port we picked may be taken by someone else before we bind it
        self.host = LOOPBACK
        self.canal_user = canal_user
        self.canal_password = canal_password
        self.start_timeout_s = start_timeout_s
        self.extra_options = tuple(extra_options)
        self.tls = tls  # offered to clients that ask; plain connections stay allowed
        self._root_password = secrets.token_hex(16)
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never shows a password
        return f"MariaDBServer({self.host}:{self.port}, root_dir={str(self.root_dir)!r})"

    # -- paths ------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.root_dir / "data"

    @property
    def socket_path(self) -> Path:
        return self.root_dir / "mariadb.sock"

    @property
    def defaults_file(self) -> Path:
        return self.root_dir / "my.cnf"

    @property
    def error_log(self) -> Path:
        return self.root_dir / "mariadb.err"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> MariaDBServer:
        """Initialise the data directory on first use, start ``mariadbd`` and wait until root can log in."""
        if self.running:
            return self
        server, installer = mariadb_binaries()
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self._write_defaults_file()
        first_start = not (self.data_dir / "mysql").is_dir()
        if first_start:
            self._install(installer)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            offset = self.error_log.stat().st_size if self.error_log.exists() else 0
            self._process = subprocess.Popen(
                [server, f"--defaults-file={self.defaults_file}"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
            if wait_for(self._can_log_in(first_start), self.start_timeout_s, alive=lambda: self.running):
                break
            how = "exited" if not self.running else f"did not accept logins within {self.start_timeout_s} s"
            self.kill()
            if self._may_move and attempt < PORT_ATTEMPTS and PORT_TAKEN in read_from(self.error_log, offset):
                self.port = free_port()
                self._write_defaults_file()
                continue
            raise ServiceError(f"MariaDB on {self.address} {how}; its log ends with:\n{tail(self.error_log)}")
        self._may_move = False  # from now on clients know the port: restarts keep it
        if first_start:
            self._bootstrap()
        return self

    # -- SQL ----------------------------------------------------------------------

    def connect(self, database: str | None = None, *, autocommit: bool = True) -> pymysql.connections.Connection:
        """A root connection over TCP, utf8mb4; the caller closes it."""
        return pymysql.connect(**self.connect_arguments(database, autocommit=autocommit))

    def connect_arguments(self, database: str | None = None, *, autocommit: bool = True) -> dict[str, Any]:
        """``pymysql.connect`` keyword arguments of :meth:`connect`, for a process of its own (holds the password)."""
        return {
            "host": self.host,
            "port": self.port,
            "user": "root",
            "password": self._root_password,
            "database": database,
            "charset": "utf8mb4",
            "autocommit": autocommit,
            "connect_timeout": 10,
            "read_timeout": 120,
            "write_timeout": 120,
            # PyMySQL's default (TLS if offered) builds an SSL context for every connection: 50 ms of CPU,
            # which tests that poll the binlog every 50 ms paid over and over.
            "ssl_disabled": True,
        }

    @contextmanager
    def connection(self, database: str | None = None, *, autocommit: bool = True) -> Iterator[Any]:
        """:meth:`connect` as a context manager that closes the connection."""
        conn = self.connect(database, autocommit=autocommit)
        try:
            yield conn
        finally:
            conn.close()

    def execute(self, *statements: str, database: str | None = None) -> list[tuple[Any, ...]]:
        """Run statements in order (autocommit) and return the last one's rows."""
        rows: list[tuple[Any, ...]] = []
        with self.connection(database) as conn, conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
                rows = list(cursor.fetchall())
        return rows

    def master_status(self) -> tuple[str, int]:
        """The binlog file and position a reader would start at now (``SHOW MASTER STATUS``)."""
        rows = self.execute("SHOW MASTER STATUS")
        if not rows:
            raise ServiceError(f"MariaDB on {self.address} has no binlog (SHOW MASTER STATUS is empty)")
        return str(rows[0][0]), int(rows[0][1])

    def last_event_start(self, event_type: str, since: tuple[str, int] | None = None) -> tuple[str, int]:
        """Where the newest binlog event of ``event_type`` (``Xid``, ``Query``...) starts: Canal's entry offset.

        ``since``, a binlog file and an event's start in it, limits the search
        to the events from there to that file's end (a long binlog reads slowly).
        """
        journal, start = since or (self.master_status()[0], 0)
        events = self.execute(f"SHOW BINLOG EVENTS IN '{journal}'" + (f" FROM {int(start)}" if start else ""))
        starts = [event[1] for event in events if event[2] == event_type]  # Log_name, Pos, Event_type, ...
        if not starts:
            raise LookupError(f"no {event_type} event in {journal}")
        return journal, int(starts[-1])

    def snapshot_user(self, user: str, password: str, database: str, signal_table: str, *,
                      require_tls: bool = False) -> None:
        """(Re)create ``user`` with the grants docs/guide/snapshot.md asks for: SELECT on ``database``, INSERT and
        DELETE on its ``signal_table``; ``require_tls``: it may log in over TLS only (``REQUIRE SSL``)."""
        self.execute(f"DROP USER IF EXISTS '{user}'@'%'",
                     f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'" + (" REQUIRE SSL" if require_tls else ""),
                     f"GRANT SELECT ON `{database}`.* TO '{user}'@'%'",
                     f"GRANT INSERT, DELETE ON `{database}`.`{signal_table}` TO '{user}'@'%'")

    def history_user(self, user: str, password: str, database: str) -> None:
        """(Re)create ``database`` and ``user`` owning it, for Canal's schema history in MySQL (``mysql-tsdb.xml``):
        Canal creates its two tables there and reads and writes them."""
        self.create_database(database)
        self.execute(f"DROP USER IF EXISTS '{user}'@'%'",
                     f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
                     f"GRANT ALL PRIVILEGES ON `{database}`.* TO '{user}'@'%'")

    def create_database(self, name: str) -> None:
        """A utf8mb4 database (dropped first if it exists)."""
        self.execute(f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")

    # -- internals ----------------------------------------------------------------

    def _write_defaults_file(self) -> None:
        # Written at every start: the port and paths are this object's.
        options = [
            "user=root",
            f"datadir={self.data_dir}",
            f"socket={self.socket_path}",
            f"pid-file={self.root_dir / 'mariadb.pid'}",
            f"log-error={self.error_log}",
            f"port={self.port}",
            f"bind-address={LOOPBACK}",
            "skip-name-resolve",
            "server_id=1",
            f"log_bin={self.data_dir / 'mysql-bin'}",
            "binlog_format=ROW",
            "binlog_row_image=FULL",
            "character-set-server=utf8mb4",
            "collation-server=utf8mb4_general_ci",
            "innodb_buffer_pool_size=64M",
            "innodb_log_file_size=48M",
            "max_connections=100",
            *([f"ssl-ca={self.tls.ca}", f"ssl-cert={self.tls.cert}", f"ssl-key={self.tls.key}"] if self.tls else []),
            *self.extra_options,
        ]
        text = "# written by tests.infra.mariadb; a private test instance\n[mysqld]\n"
        text += "\n".join(options) + "\n[client]\n" + f"socket={self.socket_path}\n"
        self.defaults_file.write_text(text, encoding="utf-8")

    def _install(self, installer: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [
                installer,
                f"--defaults-file={self.defaults_file}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if result.returncode != 0:
            raise ServiceError(
                f"mariadb-install-db failed (exit {result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
            )

    def _can_log_in(self, first_start: bool) -> Any:
        # On the first start root has no password yet (install-db's "normal"
        # auth) and exists for the socket only: the bootstrap goes that way.
        def attempt() -> bool:
            try:
                conn = self._root_socket_connection() if first_start else self.connect()
            except pymysql.err.OperationalError:
                return False
            conn.close()
            return True

        return attempt

    def _root_socket_connection(self) -> pymysql.connections.Connection:
        return pymysql.connect(
            unix_socket=str(self.socket_path), user="root", password="", autocommit=True, connect_timeout=2
        )

    def _bootstrap(self) -> None:
        conn = self._root_socket_connection()
        try:
            with conn.cursor() as cursor:
                # Parameters, not string formatting: the passwords stay out of any SQL text we build.
                for host in ("localhost", "127.0.0.1"):
                    cursor.execute("CREATE USER IF NOT EXISTS 'root'@%s", (host,))
                    cursor.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, self._root_password))
                    cursor.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@%s WITH GRANT OPTION", (host,))
                cursor.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (self.canal_user, self.canal_password))
                cursor.execute(f"GRANT {CANAL_GRANTS} ON *.* TO %s@'%%'", (self.canal_user,))
        finally:
            conn.close()
