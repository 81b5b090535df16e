"""How a snapshot's connections to the source database use TLS: one mode, named as MariaDB Connector/J names
its ``sslMode``, for the runner's own connection (PyMySQL, here) and Spark's JDBC reads alike."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

TLS_MODES = ("disable", "trust", "verify-ca", "verify-full")
VERIFYING = ("verify-ca", "verify-full")  # the modes that check the server's certificate


@dataclass(frozen=True)
class SourceTls:
    """``disable``: plain TCP. ``trust``: encrypted, any certificate taken. ``verify-ca``: encrypted, the
    server's certificate signed by ``ca`` (a PEM file; without it, by a CA the system trusts). ``verify-full``:
    that, and the certificate issued for the host connected to. Any mode but ``disable`` refuses a server
    without TLS."""

    mode: str = "disable"
    ca: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in TLS_MODES:
            raise ValueError(f"TLS mode {self.mode!r} is not one of {', '.join(TLS_MODES)}")

    @property
    def enabled(self) -> bool:
        return self.mode != "disable"

    @property
    def verifies(self) -> bool:
        """Whether the server's certificate is checked (so that ``ca`` means something)."""
        return self.mode in VERIFYING

    def context(self) -> ssl.SSLContext | None:
        """The client side of this mode for Python's ``ssl`` (None: ``disable``)."""
        if not self.enabled:
            return None
        context = ssl.create_default_context(cafile=self.ca if self.verifies else None)
        # As Connector/J and PyMySQL: the certificates MySQL makes itself lack what strict X.509 checks want.
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
        context.check_hostname = self.mode == "verify-full"
        if not self.verifies:
            context.verify_mode = ssl.CERT_NONE
        return context


NO_TLS = SourceTls()
