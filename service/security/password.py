"""The admin password (deleteQueue, the dashboard's login): how it is stored and
checked.

- The stored form pinledger writes (`pinledger hash-password`, PINLEDGER_ADMIN_PASSWORD_HASH)
  is scrypt from the standard library, its parameters in the string:
  `scrypt$<n>$<r>$<p>$<salt hex>$<key hex>`. A graphics card tries a few thousand of
  these a second where it tries billions of SHA-256 (decision 0026).
- PinLater's form is still accepted, so that existing configs keep working:
  PINLEDGER_ADMIN_PASSWORD_SHA256 holds the hex SHA-256 of password + salt
  (PINLEDGER_ADMIN_SALT). A server with it warns at start.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass, field

# scrypt's cost: 2^15 x 8 x 128 B = 32 MiB and ~80 ms per check on the 2-core dev
# machine. Stored with each hash, so raising them later leaves old hashes valid.
SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 1
_SALT_BYTES = 16
_KEY_BYTES = 32
# Above what any stored n, r may ask (128 * r * n bytes), up to n = 2^17 at r = 8.
_MAX_MEM = 256 * 1024 * 1024


def hash_password(password: str, salt: str) -> str:
    """PinLater's form: the hex SHA-256 of password + salt."""
    return hashlib.sha256((password + salt).encode("utf-8")).hexdigest()


def hash_password_scrypt(password: str, salt: bytes | None = None) -> str:
    """The stored form pinledger writes."""
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    key = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${key.hex()}"


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=_MAX_MEM, dklen=_KEY_BYTES
    )


def parse_scrypt(stored: str) -> tuple[int, int, int, bytes, bytes]:
    """(n, r, p, salt, key) of a stored scrypt hash; ValueError saying what is wrong
    (never echoing the string)."""
    parts = stored.strip().split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError("it is not of the form scrypt$<n>$<r>$<p>$<salt hex>$<key hex>")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, key = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        raise ValueError("its n, r and p must be numbers, its salt and key hex") from None
    if n < 2 or n & (n - 1) or r < 1 or p < 1 or 128 * r * n > _MAX_MEM or not salt or not key:
        raise ValueError("its parameters are out of range (n a power of 2, r and p >= 1)")
    return n, r, p, salt, key


@dataclass(frozen=True, slots=True)
class AdminPassword:
    """The configured admin password, in whichever form it is stored; nothing configured
    refuses every password."""

    scrypt: str = field(default="", repr=False)
    sha256: str = field(default="", repr=False)
    salt: str = field(default="", repr=False)

    @property
    def configured(self) -> bool:
        return bool(self.scrypt or self.sha256)

    @property
    def legacy(self) -> bool:
        """PinLater's fast hash is what is configured."""
        return not self.scrypt and bool(self.sha256)

    @property
    def fingerprint(self) -> str:
        """What identifies this password (the dashboard signs sessions with a key
        derived from it: a new password ends every session)."""
        return self.scrypt.strip() or self.sha256.strip().lower()

    def check(self, password: str) -> bool:
        """Whether `password` is the admin password; False when none is configured."""
        if self.scrypt:
            n, r, p, salt, key = parse_scrypt(self.scrypt)
            return hmac.compare_digest(_scrypt(password, salt, n, r, p), key)
        if not self.sha256:
            return False
        actual = hash_password(password, self.salt).encode("ascii")
        # compare_digest: the time taken does not reveal how many leading digits matched.
        return hmac.compare_digest(actual, self.sha256.strip().lower().encode("utf-8"))


def check_password(password: str, salt: str, expected_hex: str | None) -> bool:
    """PinLater's check of the fast form (kept for its callers and tests)."""
    return AdminPassword(sha256=expected_hex or "", salt=salt).check(password)
