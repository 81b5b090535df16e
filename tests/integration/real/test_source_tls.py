"""A snapshot reaches its source over TLS when told to (real MariaDB offering TLS, a user that must use it): the
runner's own connection and Spark's JDBC reads check the certificate as the mode says, and a certificate
that is not the one expected is refused as a TLS problem that names the settings, never as a lost server
(which would be tried again and again)."""

from __future__ import annotations

import secrets

import pytest

from canalbridge.source_db import SourceDb, SourceDbAuthError, SourceDbTlsError, SourceTls, table_key
from canalbridge.source_db.chunks import KeyRange
from spark_sink.chunk_read import JdbcSource, read_chunk
from tests.infra.tls import make_certificates

pytestmark = pytest.mark.real

DB = "sourcetls"
USER, PASSWORD = "tlsreader", f"pw-{secrets.token_hex(8)}"


@pytest.fixture(scope="module")
def must_use_tls(mariadb):
    """A table, and a user that MariaDB lets in over TLS only."""
    mariadb.create_database(DB)
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(16))",
                    "INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three')", database=DB)
    mariadb.execute(f"DROP USER IF EXISTS '{USER}'@'%'",
                    f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}' REQUIRE SSL",
                    f"GRANT SELECT ON {DB}.* TO '{USER}'@'%'")
    return mariadb


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> str:
    """A CA that signed nothing the server holds."""
    return str(make_certificates(tmp_path_factory.mktemp("other-ca"), name="other").ca)


def cipher(db: SourceDb) -> str:
    return str(db.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")[0][1])


def test_the_runners_connection_takes_the_server_whose_certificate_the_ca_signed(must_use_tls, other_ca):
    ca = str(must_use_tls.tls.ca)
    for tls in (SourceTls("verify-full", ca), SourceTls("verify-ca", ca), SourceTls("trust")):
        with SourceDb(must_use_tls.host, must_use_tls.port, USER, PASSWORD, tls=tls) as db:
            assert cipher(db), f"{tls.mode}: encrypted"
            assert table_key(db, DB, "items").names == ("id",)
    with SourceDb(must_use_tls.host, must_use_tls.port, USER, PASSWORD, tls=SourceTls("trust", other_ca)) as db:
        assert cipher(db), "trust checks no certificate"


def test_without_tls_the_user_is_refused_and_told_to_check_tls(must_use_tls):
    with SourceDb(must_use_tls.host, must_use_tls.port, USER, PASSWORD) as db, \
            pytest.raises(SourceDbAuthError, match="and `tls` if the user must connect over TLS"):
        db.query("SELECT 1")


def test_a_certificate_another_ca_signed_or_issued_for_another_host_is_a_tls_error(must_use_tls, other_ca):
    host, port = must_use_tls.host, must_use_tls.port
    with SourceDb(host, port, USER, PASSWORD, tls=SourceTls("verify-ca", other_ca)) as db, \
            pytest.raises(SourceDbTlsError, match=r"TLS \(verify-ca\) failed: .*certificate verify failed"):
        db.query("SELECT 1")
    # The certificate is issued for the loopback address, not for the name "localhost" that leads to it.
    ca = str(must_use_tls.tls.ca)
    with SourceDb("localhost", port, USER, PASSWORD, tls=SourceTls("verify-full", ca)) as db, \
            pytest.raises(SourceDbTlsError, match="Hostname mismatch"):
        db.query("SELECT 1")
    with SourceDb("localhost", port, USER, PASSWORD, tls=SourceTls("verify-ca", ca)) as db:
        assert cipher(db), "verify-ca checks the signature, not the name"


@pytest.mark.spark
def test_sparks_reads_check_the_certificate_as_the_runner_does(spark, must_use_tls, other_ca):
    host, port = must_use_tls.host, must_use_tls.port
    with SourceDb(host, port, USER, PASSWORD, tls=SourceTls("verify-full", str(must_use_tls.tls.ca))) as db:
        key = table_key(db, DB, "items")
    everything = [KeyRange(None, None)]
    verified = JdbcSource(host, port, USER, PASSWORD, SourceTls("verify-full", str(must_use_tls.tls.ca)))
    rows = read_chunk(spark, verified, key, [("id", "int"), ("name", "varchar(16)")], everything).collect()
    assert sorted((row.c0, row.c1) for row in rows) == [(1, "one"), (2, "two"), (3, "three")]  # (read as values)
    with pytest.raises(Exception, match=r"PKIX|certification path"):  # (the JVM's words, through Py4J)
        read_chunk(spark, JdbcSource(host, port, USER, PASSWORD, SourceTls("verify-ca", other_ca)), key,
                   [("id", "int")], everything).collect()
    with pytest.raises(Exception, match="Access denied"):
        read_chunk(spark, JdbcSource(host, port, USER, PASSWORD), key, [("id", "int")], everything).collect()
