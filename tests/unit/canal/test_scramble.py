"""scramble411 as Canal's SecurityUtil and MySQL's native password define it."""

import os

from canalbridge.canal.scramble import client_token, server_check, stored_password_hash


def test_stored_hash_matches_mysql_native_password():
    # MySQL: SELECT PASSWORD('secret') -> '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'
    assert stored_password_hash("secret").hex().upper() == "14E65567ABDB5135D0CFD9A70B3032C179A49EE7"


def test_stored_hash_matches_canal_default_passwd():
    # canal.passwd in Canal's shipped instance.properties is the hash of "canal".
    assert stored_password_hash("canal").hex() == "e3619321c1a937c46a0d8bd1dac39f93b27d4458"


def test_server_accepts_token_of_right_password():
    seed = os.urandom(8)
    assert server_check(client_token("s3cr3t-ü", seed), stored_password_hash("s3cr3t-ü"), seed)


def test_server_rejects_wrong_password_and_wrong_seed():
    seed = os.urandom(8)
    stored = stored_password_hash("right")
    assert not server_check(client_token("wrong", seed), stored, seed)
    assert not server_check(client_token("right", seed), stored, bytes(8))


def test_token_is_lowercase_hex_and_never_the_password():
    token = client_token("hunter2", b"\x01" * 8)
    assert len(token) == 40 and token == token.lower()
    assert b"hunter2" not in token


def test_empty_password_sends_empty_token():
    assert client_token("", b"12345678") == b""


def test_garbage_token_is_rejected_not_raised():
    assert not server_check(b"not-hex", stored_password_hash("x"), b"12345678")
