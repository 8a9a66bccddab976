"""A queue resized when `partitions` in the queue config changes (issue 24; decision
0030). It used to be read only when a queue was created; changed later, it now resizes
the queue live, as `pinledger queue resize` does: raised, the queue gets more
partitions; lowered, the partitions past it take no new jobs and drain.

One server acts: the one that owns the catalog's partition (scope CATALOG_OWNER: every
server reads the config, and one record per change is enough). It checks on each
members tick (2 s), so a new catalog owner after a failover picks up what its
predecessor had not done. A change it asked for is not asked again while the catalog
projection catches up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pinledger.ledger.clock import Clock
from pinledger.ledger.events import Actor
from pinledger.ledger.formats import FormatTooOldError
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import QueueRow
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.ownership.maintenance.duty import Duty, Schedule, Scope
from pinledger.service.ownership.peers import MEMBERS_EVERY_S
from pinledger.service.queue_config import QueueConfig

log = logging.getLogger(__name__)

# How long a resize this server appended may take to show in the catalog projection
# before it is asked again.
ASKED_GRACE_S = 30.0


def wanted_sizes(config: QueueConfig, queues: Iterable[QueueRow]) -> dict[str, int]:
    """Queue -> the partitions the config asks to take jobs, for each queue where that
    is not what the catalog says."""
    found = {}
    for row in queues:
        wanted = config.settings(row.name).partitions
        if wanted is not None and wanted != row.open:
            found[row.name] = wanted
    return found


class QueueSizes(Duty):
    name = "queue-sizes"
    scope = Scope.CATALOG_OWNER

    def __init__(
        self,
        writer: LedgerWriter,
        config: Callable[[], QueueConfig],
        queues: Callable[[], Iterable[QueueRow]],
        clock: Clock,
        actor: Actor,
    ) -> None:
        self.writer = writer
        self.config = config
        self.queues = queues
        self.clock = clock
        self.actor = actor
        # Queue -> (partitions asked for, until when not to ask again: monotonic).
        self._asked: dict[str, tuple[int, float]] = {}
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0, clock=clock)
        self.schedule = Schedule(MEMBERS_EVERY_S)

    def run(self, now_ms: int) -> list[str]:
        """Resize what the config asks to; the queues resized now."""
        now = self.clock.monotonic()
        resized = []
        for name, wanted in sorted(wanted_sizes(self.config(), self.queues()).items()):
            asked = self._asked.get(name)
            if asked is not None and asked[0] == wanted and asked[1] > now:
                continue
            try:
                self.writer.resize_queue(
                    name,
                    wanted,
                    now_ms,
                    self.actor,
                    f"queue config: partitions {wanted}",
                )
            except (FormatTooOldError, LogError) as exc:
                self._failures.warning(
                    "the queue config asks for %d partitions of queue %r; not resized: %s",
                    wanted,
                    name,
                    exc,
                )
                continue
            self._asked[name] = (wanted, now + ASKED_GRACE_S)
            log.info(
                "queue %r resized: partitions 0..%d take jobs, as the queue config asks",
                name,
                wanted - 1,
            )
            resized.append(name)
        return resized
