"""The deleteQueue admin password, checked exactly as PinLater did: the configured value
is the hex SHA-256 of password + salt, so existing PinLater configs keep working."""

from __future__ import annotations

import hashlib
import hmac


def hash_password(password: str, salt: str) -> str:
    return hashlib.sha256((password + salt).encode("utf-8")).hexdigest()


def check_password(password: str, salt: str, expected_hex: str | None) -> bool:
    """False when no hash is configured: deleting a queue then needs a configured password,
    never an empty one."""
    if not expected_hex:
        return False
    actual = hash_password(password, salt).encode("ascii")
    # compare_digest so the time taken does not reveal how many leading digits matched.
    return hmac.compare_digest(actual, expected_hex.strip().lower().encode("utf-8"))
