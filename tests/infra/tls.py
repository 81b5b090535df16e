"""Certificates for the test servers that speak TLS: a private CA, and a server certificate it signs for the
loopback address, made with the ``openssl`` command (no key or certificate is ever committed)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.infra.processes import LOOPBACK

_DAYS = "2"  # a test run's certificates outlive the run, not the day after
_NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")  # (EC: made at once, not RSA's 1 s)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA's certificate (what a client trusts), and the server's certificate and key."""

    ca: Path
    cert: Path
    key: Path


def make_certificates(directory: Path, *, name: str = "server") -> TlsFiles:
    """A new CA and a server certificate it signs for ``LOOPBACK`` (an IP subject alternative name, which a
    client that checks host names matches), under ``directory``; a second call with another ``name`` makes an
    unrelated CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, request, cert = (directory / f"{name}-{part}.pem"
                                      for part in ("ca-key", "ca", "key", "request", "cert"))
    extensions = directory / f"{name}-extensions.cnf"
    # Strict verifiers (Python's VERIFY_X509_STRICT, Java's) want these extensions in a leaf certificate.
    extensions.write_text(f"basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature, "
                          f"keyEncipherment\nextendedKeyUsage = serverAuth\nsubjectAltName = IP:{LOOPBACK}\n"
                          "authorityKeyIdentifier = keyid\nsubjectKeyIdentifier = hash\n", encoding="utf-8")
    _openssl("req", "-x509", *_NEW_KEY, "-keyout", ca_key, "-out", ca, "-days", _DAYS,
             "-subj", f"/CN=canalbridge test CA {name}")
    _openssl("req", *_NEW_KEY, "-keyout", key, "-out", request, "-subj", f"/CN={LOOPBACK}")
    _openssl("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
             "-days", _DAYS, "-extfile", extensions)
    return TlsFiles(ca, cert, key)


def _openssl(*arguments: str | Path) -> None:
    result = subprocess.run(["openssl", *map(str, arguments)], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {arguments[0]} failed: {result.stderr.strip()}")
