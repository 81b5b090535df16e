"""MySQL's scramble411 password exchange, as Canal uses it for ClientAuth.

The client never sends its password: it sends
``SHA1(password) XOR SHA1(seed + SHA1(SHA1(password)))`` as lowercase hex.
The server stores only ``SHA1(SHA1(password))`` (Canal's ``canal.passwd``)
and checks the token against it (Canal's ``SecurityUtil``).
"""

from __future__ import annotations

import hashlib
import hmac


def _sha1(*parts: bytes) -> bytes:
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part)
    return digest.digest()


def scramble411(password: bytes, seed: bytes) -> bytes:
    """Return the 20-byte token a client sends for ``password`` and ``seed``."""
    stage1 = _sha1(password)
    stage2 = _sha1(stage1)
    mask = _sha1(seed, stage2)
    return bytes(a ^ b for a, b in zip(mask, stage1))


def client_token(password: str, seed: bytes) -> bytes:
    """The ``ClientAuth.password`` field: hex of scramble411, or empty for no password."""
    if not password:
        return b""
    return scramble411(password.encode("utf-8"), seed).hex().encode("ascii")


def stored_password_hash(password: str) -> bytes:
    """What a server keeps for ``password``: ``SHA1(SHA1(password))``."""
    return _sha1(_sha1(password.encode("utf-8")))


def server_check(token_hex: bytes, stored_hash: bytes, seed: bytes) -> bool:
    """Check a client's token against the stored double hash, as Canal's server does."""
    try:
        token = bytes.fromhex(token_hex.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return False
    if len(token) != len(stored_hash):
        return False
    stage1 = bytes(a ^ b for a, b in zip(token, _sha1(seed, stored_hash)))
    return hmac.compare_digest(_sha1(stage1), stored_hash)
