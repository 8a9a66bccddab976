"""Who may act: a login with the admin password, a signed session cookie, a CSRF token
per session.

The password is PinLater's deleteQueue password (PINLEDGER_ADMIN_PASSWORD_SHA256 and
PINLEDGER_ADMIN_SALT, service/password.py). Sessions are stateless: the cookie is
`<user>.<expires ms>.<signature>`, signed with a key derived from the configured hash,
so every server of a cluster accepts the cookie another issued, and changing the
password signs everyone out. The CSRF token is a second signature of the cookie, put in
every form; a POST must carry the one of its own session.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from pinledger.ledger.clock import Clock
from pinledger.service.password import check_password

COOKIE = "pinledger_session"
SESSION_TTL_MS = 8 * 3600 * 1000
USER = "admin"
_USER_NAME = re.compile(r"^[\w-]{1,64}$")


class Sessions:
    def __init__(self, password_sha256: str, salt: str, clock: Clock) -> None:
        self._hash = password_sha256.strip().lower()
        self._salt = salt
        self._clock = clock
        self._key = hashlib.sha256(f"pinledger-dashboard:{self._hash}".encode()).digest()

    @property
    def enabled(self) -> bool:
        """False without a configured password: then nobody can log in."""
        return bool(self._hash)

    def login(self, password: str, user: str = USER) -> str | None:
        """A new session's cookie value for the right password, else None."""
        if not self.enabled or not check_password(password, self._salt, self._hash):
            return None
        if not _USER_NAME.match(user):
            return None
        expires = self._clock.now_ms() + SESSION_TTL_MS
        body = f"{user}.{expires}"
        return f"{body}.{self._sign('session', body)}"

    def user(self, cookie: str | None) -> str | None:
        """The user a cookie value names when it is ours and not expired, else None."""
        if not cookie or not self.enabled:
            return None
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        user, expires, signature = parts
        if not hmac.compare_digest(signature, self._sign("session", f"{user}.{expires}")):
            return None
        if int(expires) <= self._clock.now_ms():
            return None
        return user

    def csrf_token(self, cookie: str) -> str:
        return self._sign("csrf", cookie)

    def check_csrf(self, cookie: str | None, token: str | None) -> bool:
        """Whether `token` is the CSRF token of the valid session `cookie`."""
        if cookie is None or token is None or self.user(cookie) is None:
            return False
        return hmac.compare_digest(token, self.csrf_token(cookie))

    def _sign(self, purpose: str, text: str) -> str:
        return hmac.new(self._key, f"{purpose}:{text}".encode(), hashlib.sha256).hexdigest()
