"""The admin password: scrypt, the form pinledger writes, and PinLater's SHA-256 form,
still accepted."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.service.security.password import (
    SCRYPT_N,
    SCRYPT_P,
    SCRYPT_R,
    AdminPassword,
    check_password,
    hash_password,
    hash_password_scrypt,
    parse_scrypt,
)


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


# -- scrypt, the form pinledger writes --------------------------------------------------


def test_scrypt_form_holds_its_parameters_and_checks_the_password() -> None:
    stored = hash_password_scrypt("secret", salt=b"0123456789abcdef")
    n, r, p, salt, key = parse_scrypt(stored)
    assert (n, r, p, salt) == (SCRYPT_N, SCRYPT_R, SCRYPT_P, b"0123456789abcdef")
    assert key == hashlib.scrypt(
        b"secret", salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024, dklen=len(key)
    )
    admin = AdminPassword(scrypt=stored)
    assert admin.configured and not admin.legacy
    assert admin.check("secret")
    assert not admin.check("Secret")
    assert not admin.check("")


def test_each_scrypt_hash_has_its_own_salt() -> None:
    assert hash_password_scrypt("secret") != hash_password_scrypt("secret")


def test_older_cheaper_parameters_stay_valid() -> None:
    """Parameters live in the string: a hash made with other costs still checks."""
    salt = b"salt-of-16-bytes"
    key = hashlib.scrypt(b"pw", salt=salt, n=1024, r=4, p=2, dklen=32)
    assert AdminPassword(scrypt=f"scrypt$1024$4$2${salt.hex()}${key.hex()}").check("pw")


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "scrypt$1$8$1$00$00",
        "scrypt$1000$8$1$00$00",
        "scrypt$1024$8$1$zz$00",
        "bcrypt$10$xx",
        "scrypt$1024$8$1$$",
        f"scrypt${2**30}$8$1$00$00",
    ],
)
def test_a_malformed_scrypt_hash_is_refused_without_echoing_it(stored: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_scrypt(stored)
    if stored:
        assert stored not in str(refused.value)


def test_pinlaters_form_is_still_accepted_and_flagged_legacy() -> None:
    admin = AdminPassword(sha256=hash_password("secret", "salt"), salt="salt")
    assert admin.legacy and admin.check("secret") and not admin.check("secre")
    assert not AdminPassword().configured and not AdminPassword().check("")


@given(st.text(max_size=30), st.text(max_size=30))
@settings(max_examples=10, deadline=None)  # each check costs scrypt's ~80 ms
def test_only_the_password_itself_checks(password: str, other: str) -> None:
    admin = AdminPassword(scrypt=hash_password_scrypt(password))
    assert admin.check(password)
    assert admin.check(other) == (other == password)
