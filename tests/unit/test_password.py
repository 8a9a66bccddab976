"""The deleteQueue password, checked as PinLater did."""

from __future__ import annotations

import hashlib

from pinledger.service.password import check_password, hash_password


def test_hash_is_sha256_of_password_then_salt() -> None:
    assert hash_password("secret", "salt") == hashlib.sha256(b"secretsalt").hexdigest()
    assert hash_password("", "") == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_check() -> None:
    expected = hash_password("secret", "salt")
    assert check_password("secret", "salt", expected)
    assert check_password("secret", "salt", expected.upper())
    assert not check_password("secreT", "salt", expected)
    assert not check_password("secret", "pepper", expected)
    assert not check_password("secret", "salt", expected[:-1])
    assert not check_password("secret", "salt", "not hex ünicode")


def test_no_configured_hash_refuses_everything() -> None:
    assert not check_password("", "", None)
    assert not check_password("", "", "")
