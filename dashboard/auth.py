"""Who may act: a login with the admin password, a signed session cookie, a CSRF token
per session.

The password is the admin password (PINLEDGER_ADMIN_PASSWORD_HASH, or PinLater's
PINLEDGER_ADMIN_PASSWORD_SHA256 and PINLEDGER_ADMIN_SALT; service/security/password.py). Sessions
are signed cookies, `<user>.<expires ms>.<nonce>.<signature>`, signed with a key
derived from the configured hash, so every server of a cluster accepts the cookie
another issued, and changing the password signs everyone out. A logout ends its session
on every server before it expires: a digest of the cookie goes to the store
(projections.store.SessionStore), which every server asks. The CSRF token is a second
signature of the cookie, put in every form; a POST must carry the one of its own
session.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import secrets
import threading
from collections import OrderedDict, deque

from pinledger.ledger.clock import Clock
from pinledger.projections.store import SessionStore, StoreError
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.security.password import AdminPassword

_noise = RateLimitedLog(logging.getLogger(__name__))

COOKIE = "pinledger_session"
SESSION_TTL_MS = 8 * 3600 * 1000
USER = "admin"
_USER_NAME = re.compile(r"^[\w-]{1,64}$")
# Failed logins from one address within the window, past which its logins are refused
# until the oldest failure leaves the window: a guesser gets 5 tries a minute.
LOGIN_FAILURES = 5
LOGIN_WINDOW_S = 60.0
# Addresses remembered at once (the least recently failed forgotten first): bounded memory.
LOGIN_CLIENTS = 10_000


class TooManyLoginsError(Exception):
    """Too many failed logins from one address: wait `wait_s`."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"too many failed logins: try again in {math.ceil(wait_s)} s")
        self.wait_s = wait_s


class LoginLimit:
    """Counts failed logins per client address in a sliding window."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def check(self, client: str) -> None:
        """Raise TooManyLoginsError while `client` has used up its failures."""
        now = self._clock.monotonic()
        with self._lock:
            failures = self._recent(client, now)
            if len(failures) >= LOGIN_FAILURES:
                raise TooManyLoginsError(failures[0] + LOGIN_WINDOW_S - now)

    def failed(self, client: str) -> None:
        now = self._clock.monotonic()
        with self._lock:
            self._recent(client, now).append(now)
            self._failures.move_to_end(client)
            while len(self._failures) > LOGIN_CLIENTS:
                self._failures.popitem(last=False)

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(client, deque())
        while failures and failures[0] <= now - LOGIN_WINDOW_S:
            failures.popleft()
        return failures


class Sessions:
    def __init__(self, password: AdminPassword, clock: Clock, ended: SessionStore) -> None:
        self._password = password
        self._clock = clock
        self._ended = ended
        self._limit = LoginLimit(clock)
        self._key = hashlib.sha256(f"pinledger-dashboard:{password.fingerprint}".encode()).digest()

    @property
    def enabled(self) -> bool:
        """False without a configured password: then nobody can log in."""
        return self._password.configured

    def login(self, password: str, user: str = USER, client: str = "") -> str | None:
        """A new session's cookie value for the right password, else None; raises
        TooManyLoginsError while `client` (its address) has failed too often."""
        if not self.enabled:
            return None
        self._limit.check(client)
        if not self._password.check(password):
            self._limit.failed(client)
            return None
        if not _USER_NAME.match(user):
            return None
        expires = self._clock.now_ms() + SESSION_TTL_MS
        # The nonce tells apart two sessions begun in the same millisecond, so that a
        # logout ends its own only.
        body = f"{user}.{expires}.{secrets.token_hex(8)}"
        return f"{body}.{self._sign('session', body)}"

    def user(self, cookie: str | None) -> str | None:
        """The user a cookie value names when it is ours, not expired and not ended by
        a logout, else None. A store that cannot say counts as ended (logged)."""
        expires = self._valid_until(cookie)
        if cookie is None or expires is None:
            return None
        try:
            if self._ended.session_ended(_digest(cookie)):
                return None
        except StoreError as exc:
            _noise.warning("a dashboard session was refused: cannot check it: %s", exc)
            return None
        return cookie.split(".", 1)[0]

    def end(self, cookie: str | None) -> None:
        """Log out: every server refuses the cookie from now on. Raises StoreError when
        the store cannot record it."""
        expires = self._valid_until(cookie)
        if cookie is not None and expires is not None:
            self._ended.end_session(_digest(cookie), expires, self._clock.now_ms())

    def _valid_until(self, cookie: str | None) -> int | None:
        """When a cookie of ours, signed and not expired, expires; None otherwise."""
        if not cookie or not self.enabled:
            return None
        parts = cookie.split(".")
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        body, signature = cookie.rsplit(".", 1)
        if not hmac.compare_digest(signature, self._sign("session", body)):
            return None
        expires = int(parts[1])
        return expires if expires > self._clock.now_ms() else None

    def csrf_token(self, cookie: str) -> str:
        return self._sign("csrf", cookie)

    def check_csrf(self, cookie: str | None, token: str | None) -> bool:
        """Whether `token` is the CSRF token of the valid session `cookie`."""
        if cookie is None or token is None or self.user(cookie) is None:
            return False
        return hmac.compare_digest(token, self.csrf_token(cookie))

    def _sign(self, purpose: str, text: str) -> str:
        return hmac.new(self._key, f"{purpose}:{text}".encode(), hashlib.sha256).hexdigest()


def _digest(cookie: str) -> str:
    """What the store keeps of an ended session: a digest, so that the store holds no
    credential, not even an ended one."""
    return hashlib.sha256(cookie.encode()).hexdigest()
