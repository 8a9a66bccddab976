"""Which servers could not be connected to lately: those are tried last.

A server whose host is gone (not its process: a process gone refuses at once) costs
the connect timeout on every call that tries it first; with round robin, that is one
call in N. So a server that could not be connected to goes to the end of each call's
list for a backoff (1 s, doubling with each failure in a row, up to 30 s) and is tried
only when the servers before it did not serve the call: while other servers answer it
costs nothing; when none does, it is still tried, so a client never runs out of
servers. A connect that works clears the mark. One log line when a server is set
aside, one when it is back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from pinledger.client.servers import Address
from pinledger.ledger.clock import Clock

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


class ServerHealth:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        # address -> (set aside until (monotonic), failures in a row)
        self._down: dict[Address, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def order(self, addresses: Sequence[Address]) -> list[Address]:
        """`addresses` in their order, those set aside moved to the end (in theirs)."""
        if not self._down:  # read without the lock: the common case, nothing set aside
            return list(addresses)
        now = self._clock.monotonic()
        with self._lock:
            aside = {a for a, (until, _) in self._down.items() if until > now}
        if not aside:
            return list(addresses)
        return [a for a in addresses if a not in aside] + [a for a in addresses if a in aside]

    def failed(self, address: Address, error: BaseException) -> None:
        """A connect to `address` failed: set it aside, longer with each failure in a row."""
        with self._lock:
            _, failures = self._down.get(address, (0.0, 0))
            backoff = min(FIRST_BACKOFF_S * 2**failures, MAX_BACKOFF_S)
            self._down[address] = (self._clock.monotonic() + backoff, failures + 1)
        if failures == 0:
            # INFO: the call's own error says what failed when no server serves it (a
            # one-shot command's stderr keeps its one line); a worker's log shows it.
            log.info(
                "pinledger server %s cannot be connected to (%s); trying it after the other "
                "servers until a connect works",
                address,
                error,
            )

    def connected(self, address: Address) -> None:
        if address not in self._down:  # without the lock: the common case
            return
        with self._lock:
            was = self._down.pop(address, None)
        if was is not None:
            log.info("pinledger server %s can be connected to again", address)

    def set_aside(self) -> list[Address]:
        """The servers set aside now (for tests and for a caller's diagnostics)."""
        now = self._clock.monotonic()
        with self._lock:
            return sorted(a for a, (until, _) in self._down.items() if until > now)
