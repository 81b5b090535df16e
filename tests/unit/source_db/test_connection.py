"""The source's errors, typed by what the user must fix, naming the server and the table, never the password."""

from __future__ import annotations

import ssl

import pymysql
import pytest

from canalbridge.source_db import (
    SourceDb,
    SourceDbAccessError,
    SourceDbAuthError,
    SourceDbConnectionError,
    SourceDbError,
    SourceDbTlsError,
    SourceTls,
)

PASSWORD = "never-shown-secret"


@pytest.mark.parametrize(("error", "kind", "says"), [
    (pymysql.err.OperationalError(1045, "Access denied for user 'u'@'h'"), SourceDbAuthError, "'u' was refused"),
    (pymysql.err.OperationalError(1142, "SELECT command denied"), SourceDbAccessError,
     "SELECT on the tables it reads, and SELECT, INSERT and DELETE on the signal table"),
    (pymysql.err.OperationalError(2003, "Can't connect"), SourceDbConnectionError, "connection failed or lost"),
    (pymysql.err.InterfaceError(0, ""), SourceDbConnectionError, "connection failed or lost"),
    (pymysql.err.ProgrammingError(1064, "syntax"), SourceDbError, "syntax (error 1064)"),
])
def test_a_server_error_is_typed_by_what_to_fix_and_names_server_and_table(error, kind, says):
    db = SourceDb("127.0.0.1", 3306, "u", PASSWORD)
    typed = db._error(error, "db.t")
    assert type(typed) is kind
    assert says in str(typed)
    assert str(typed).startswith("source database 127.0.0.1:3306 table db.t: ")
    assert PASSWORD not in str(typed) and PASSWORD not in repr(db)


def failed_to_connect(cause: OSError) -> pymysql.err.OperationalError:
    """As PyMySQL raises a connection that failed on an ``OSError``: code 2003, the cause kept beside it."""
    error = pymysql.err.OperationalError(2003, f"Can't connect to MySQL server on '127.0.0.1' ({cause})")
    error.original_exception = cause  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(("error", "kind"), [
    (pymysql.err.OperationalError(2026, "SSL is required but the server doesn't support it"), SourceDbTlsError),
    (pymysql.err.OperationalError(3159, "Connections using insecure transport are prohibited"), SourceDbTlsError),
    (failed_to_connect(ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")),
     SourceDbTlsError),
    (failed_to_connect(ssl.SSLError(1, "no protocols available")), SourceDbTlsError),
    # A server that goes away mid-handshake (a restart) is lost, not misconfigured: tried again.
    (failed_to_connect(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")), SourceDbConnectionError),
    (failed_to_connect(ConnectionRefusedError(111, "Connection refused")), SourceDbConnectionError),
])
def test_a_tls_failure_names_the_tls_settings_and_a_cut_handshake_is_a_lost_server(error, kind):
    db = SourceDb("127.0.0.1", 3306, "u", PASSWORD, tls=SourceTls("verify-full", "/etc/ca.pem"))
    typed = db._error(error, None)
    assert type(typed) is kind
    if kind is SourceDbTlsError:
        assert "TLS (verify-full) failed" in str(typed) and "`tls` and `tls_ca`" in str(typed)


def test_a_refused_user_is_told_to_check_its_tls_too():
    refused = SourceDb("127.0.0.1", 3306, "u", PASSWORD)._error(pymysql.err.OperationalError(1045, "denied"), None)
    assert "and `tls` if the user must connect over TLS" in str(refused)


def test_each_tls_mode_checks_what_it_says():
    assert SourceTls("disable").context() is None
    trusting = SourceTls("trust").context()
    assert trusting is not None and trusting.verify_mode == ssl.CERT_NONE and not trusting.check_hostname
    by_ca = SourceTls("verify-ca").context()
    assert by_ca is not None and by_ca.verify_mode == ssl.CERT_REQUIRED and not by_ca.check_hostname
    full = SourceTls("verify-full").context()
    assert full is not None and full.verify_mode == ssl.CERT_REQUIRED and full.check_hostname
    with pytest.raises(ValueError, match="'required' is not one of disable, trust, verify-ca, verify-full"):
        SourceTls("required")


def test_without_tls_the_connection_never_takes_it_and_with_it_always_does():
    """PyMySQL alone would take TLS when the server offers it, unchecked: a mode says yes or no."""
    assert SourceDb("127.0.0.1", 3306, "u", PASSWORD)._arguments["ssl_disabled"] is True
    assert "ssl_disabled" not in SourceDb("127.0.0.1", 3306, "u", PASSWORD, tls=SourceTls("trust"))._arguments


def test_a_ca_file_that_cannot_be_loaded_is_a_tls_error_naming_it(tmp_path):
    missing = tmp_path / "ca.pem"
    with SourceDb("127.0.0.1", 3306, "u", PASSWORD, tls=SourceTls("verify-ca", str(missing))) as db:
        with pytest.raises(SourceDbTlsError, match=f"cannot load tls_ca {missing}"):
            db.query("SELECT 1")
