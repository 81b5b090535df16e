"""What a snapshot's Spark reads tell MariaDB's JDBC driver: the login and the job's TLS, in the driver's words."""

from __future__ import annotations

import pytest

from canalbridge.source_db import SourceTls
from canalbridge.sync.settings import SnapshotSettings
from spark_sink.chunk_read import DRIVER, JdbcSource


def test_the_driver_gets_the_tls_mode_and_the_ca_only_where_it_checks_certificates(tmp_path):
    plain = JdbcSource("127.0.0.1", 3306, "u", "secret").properties()
    assert plain == {"user": "u", "password": "secret", "driver": DRIVER, "sslMode": "disable"}
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n(the CA)\n-----END CERTIFICATE-----\n", encoding="ascii")
    full = JdbcSource("127.0.0.1", 3306, "u", "secret", SourceTls("verify-full", str(ca))).properties()
    # The certificate itself: an executor on another machine has no such file.
    assert full["sslMode"] == "verify-full" and full["serverSslCert"] == ca.read_text(encoding="ascii")
    assert "serverSslCert" not in JdbcSource("h", 1, "u", "p", SourceTls("verify-ca")).properties(), (
        "without a CA file: the JVM's trusted CAs")
    assert "secret" not in repr(JdbcSource("127.0.0.1", 3306, "u", "secret"))


def test_the_ca_file_is_read_once_and_a_failed_read_is_tried_again(tmp_path):
    ca = tmp_path / "ca.pem"
    source = JdbcSource("h", 1, "u", "p", SourceTls("verify-ca", str(ca)))
    with pytest.raises(FileNotFoundError):
        source.properties()
    ca.write_text("(the CA)\n", encoding="ascii")
    assert source.properties()["serverSslCert"] == "(the CA)\n"
    ca.unlink()  # each chunk's read gives the same text, without reading the file again
    assert source.properties()["serverSslCert"] == "(the CA)\n"


def test_a_jobs_snapshot_settings_name_the_source():
    settings = SnapshotSettings(host="db", user="reader", signal_table="s.t", port=3307, password="secret",
                                tls="trust")
    assert JdbcSource.of(settings) == JdbcSource("db", 3307, "reader", "secret", SourceTls("trust"))
    connection = settings.connect()
    assert (connection.address, connection.user, connection.tls) == ("db:3307", "reader", SourceTls("trust"))
