"""The owner's lease: this server hands out jobs of its partitions only while the
owners' group has recently confirmed it is still a member (decision 0039).

The group drops a member that has not heartbeated for its session timeout and gives its
partitions to the others. A server that stalled (frozen, paused by the machine, cut off
from Kafka) does not know that happened until it hears from the group again, and in
between it could claim jobs the new owner also hands out. The coordinator drops a member
no sooner than a session timeout after the last heartbeat it answered was *sent*
(GroupReader.confirmed_at), so a server that saw a confirmation less than half a session
timeout ago still holds its partitions: the other half covers the heartbeat's round
trip. A dequeue checks the lease before it takes jobs, and again once the broker has
acknowledged its claims: a claim acknowledged while the lease held landed in the log
before any other server could be assigned the partition, so the next owner projects it
before it serves; one acknowledged after is handed to nobody and times out into a retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

# The part of the session timeout a confirmation is trusted for.
LEASE_FRACTION = 0.5


class Lease:
    def __init__(
        self,
        session_timeout_s: float,
        monotonic: Callable[[], float],
        metrics: Metrics,
    ) -> None:
        self.length_s = session_timeout_s * LEASE_FRACTION
        self._monotonic = monotonic
        self._metrics = metrics
        self._confirmed_at: Callable[[], float | None] = lambda: None
        # Whether the last check found it lapsed (a lapse is logged and counted once).
        self._lapsed = False

    def attach(self, confirmed_at: Callable[[], float | None]) -> None:
        """The group reader's `confirmed_at` (the owner attaches it when it joins)."""
        self._confirmed_at = confirmed_at

    def held(self) -> bool:
        """Whether this server may hand out jobs of its partitions now (any thread)."""
        confirmed = self._confirmed_at()
        held = confirmed is not None and self._monotonic() - confirmed < self.length_s
        if held == self._lapsed:  # changed
            self._lapsed = not held
            if held:
                log.info("the owners' group confirmed this server again: serving its partitions")
            else:
                self._metrics.count(catalogue.OWNER_LEASE_LAPSES_TOTAL)
                log.warning(
                    "the owners' group has not confirmed this server for %.1f s (half the "
                    "session timeout): handing out no jobs until it does, since another "
                    "server may own its partitions by now (a stall, or Kafka unreachable)",
                    self.length_s,
                )
        return held
