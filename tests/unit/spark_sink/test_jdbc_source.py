"""What a snapshot's Spark reads tell MariaDB's JDBC driver: the login and the job's TLS, in the driver's words."""

from __future__ import annotations

from canalbridge.source_db import SourceTls
from spark_sink.chunk_read import DRIVER, JdbcSource


def test_the_driver_gets_the_tls_mode_and_the_ca_only_where_it_checks_certificates():
    plain = JdbcSource("127.0.0.1", 3306, "u", "secret").properties()
    assert plain == {"user": "u", "password": "secret", "driver": DRIVER, "sslMode": "disable"}
    full = JdbcSource("127.0.0.1", 3306, "u", "secret", SourceTls("verify-full", "/etc/ca.pem")).properties()
    assert full["sslMode"] == "verify-full" and full["serverSslCert"] == "/etc/ca.pem"
    assert "serverSslCert" not in JdbcSource("h", 1, "u", "p", SourceTls("verify-ca")).properties(), (
        "without a CA file: the JVM's trusted CAs")
    assert "secret" not in repr(JdbcSource("127.0.0.1", 3306, "u", "secret"))
