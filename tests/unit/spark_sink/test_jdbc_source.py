"""What a snapshot's Spark reads tell MariaDB's JDBC driver: the login and the job's TLS, in the driver's words."""

from __future__ import annotations

from canalbridge.source_db import SourceTls
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
