"""The owner thread: one pass polls the group reader and acts on what came back.

A pass: bring the subscription up to date, ask the group to rebalance if the watchdog
said so, poll, act on rebalance news (adopt, drop), project the records, let caught-up
partitions serve, hand out again the jobs whose failed claim proved not to have
landed, refill the ready windows running low, run the owner lane's duties that are due
(claim timeouts, garbage collection: maintenance/scheduler.py).
kafka-python wants subscribe, seek and request_rejoin on the polling thread: they all
happen here.

The owner must outlive a broken batch: a pass that raises drops every owned partition
(reloaded from Postgres) and the loop carries on.

State shared with other threads: `loop_at` and `passes` (written here, read by the
watchdog and by tests; numbers replaced whole, no lock), `alive` (read by the server's
health check), the `stop` and `rejoin` events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pinledger.ledger.clock import Clock
from pinledger.ledger.log import GroupReader
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.ownership.partitions import Partitions
from pinledger.service.ownership.topics import OwnedTopics

log = logging.getLogger(__name__)

# Enough records per poll to keep Postgres batches large, few enough that a claim
# waits at most one batch behind a backlog.
POLL_RECORDS = 2000
POLL_TIMEOUT_MS = 200
# How long the loop waits after a failed pass before the next one.
FAILED_PASS_PAUSE_S = 0.5
MAX_FAILED_PASS_PAUSE_S = 2.0


class OwnerLoop:
    def __init__(
        self,
        topics: OwnedTopics,
        partitions: Partitions,
        run_maintenance: Callable[[], None],
        rejoin: threading.Event,
        stop: threading.Event,
        clock: Clock,
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        # The owner lane's round (maintenance/scheduler.py: `Lane.run_due`).
        self.run_maintenance = run_maintenance
        self.rejoin = rejoin
        self.stop = stop
        self.clock = clock
        self.alive = False
        # When the loop last completed a pass (monotonic), and how many it has completed
        # (what a test on a fake clock, where loop_at stands still, waits on).
        self.loop_at = clock.monotonic()
        self.passes = 0
        # When the loop last began a round, whether the round then worked or not: the
        # liveness endpoint's progress (a dependency that is down is readiness's
        # business, not a reason to restart the process).
        self.turned_at = clock.monotonic()
        self._failed_in_a_row = 0
        self._failed_passes = RateLimitedLog(log, burst=3, window_s=60.0, clock=clock)
        # How long an idle poll waits (real time, in the broker); a test on fakes makes
        # it shorter so that passes come quickly.
        self.poll_timeout_ms = POLL_TIMEOUT_MS
        self.thread = threading.Thread(target=self._run, name="owner", daemon=True)
        self._reader: GroupReader | None = None

    def start(self, reader: GroupReader) -> None:
        self._reader = reader
        self.alive = True
        self.thread.start()

    def _run(self) -> None:
        reader = self._reader
        assert reader is not None
        while not self.stop.is_set():
            self.turned_at = self.clock.monotonic()
            try:
                self.run_pass(reader)
            except Exception as exc:
                # The owner must outlive a broken batch or a dependency that is down:
                # drop what it owns (so the state is reloaded from Postgres) and carry
                # on; the reload is retried on every pass until it works.
                self._failed_passes.warning(
                    "owner loop failed (%s: %s); reloading owned partitions",
                    type(exc).__name__,
                    exc,
                )
                log.debug("the owner loop's failure", exc_info=True)
                self._reload()
                self._pause_after_failure()
        self.alive = False

    def _reload(self) -> bool:
        if self.partitions.reload_all():
            return True
        exc = self.partitions.reload_error
        self._failed_passes.warning(
            "reloading owned partitions failed (%s: %s); trying again",
            type(exc).__name__,
            exc,
        )
        return False

    def _pause_after_failure(self) -> None:
        """Back off while the store or the log stays down: 0.5 s, doubling to 5 s."""
        pause = min(FAILED_PASS_PAUSE_S * 2**self._failed_in_a_row, MAX_FAILED_PASS_PAUSE_S)
        self._failed_in_a_row += 1
        self.clock.sleep(pause, self.stop)

    def run_pass(self, reader: GroupReader) -> None:
        if self.partitions.reload_pending and not self._reload():
            self._pause_after_failure()
            return
        self.topics.resubscribe(reader)
        if self.rejoin.is_set():
            self.rejoin.clear()
            reader.request_rejoin()
        records = reader.poll(POLL_RECORDS, self.poll_timeout_ms)
        self.partitions.rebalance()
        self.partitions.project(records)
        self.partitions.adopt_waiting(self.clock.monotonic())
        self.partitions.retry_paused()
        self.partitions.follow_moves()
        self.partitions.promote()
        self.partitions.settle_doubts(self.clock.monotonic())
        self.partitions.refill()
        self.run_maintenance()
        self.loop_at = self.clock.monotonic()
        self.passes += 1
        self._failed_in_a_row = 0
