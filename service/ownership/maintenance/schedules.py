"""Periodic jobs (decision 0038): the duty that enqueues each due tick of the schedules
the queue config lists, once across the cluster.

One server acts, the catalog's owner (scope CATALOG_OWNER), every second, on a thread
of its own (an enqueue waits for its projection). For each schedule it reads the last
tick the catalog recorded (`ScheduleTicked`, projected into `schedule_ticks`), asks
service/schedules/due.py what is due, enqueues that tick's job and then records the
tick. Exactly once across a failover, from both ends:

- the job is a unique job whose key names the tick (`schedule:<name>:<tick_ms>`), kept
  taken for two periods and at least a day after it finished: a new holder that enqueues
  a tick its predecessor enqueued but did not live to record gets the same job back;
- the tick is recorded in the ledger, so a new holder starts from the last tick recorded,
  never from its own clock: a tick due while nobody held the duty is enqueued once it
  is held again (the latest of several, due.py), not skipped.

The duty remembers what it recorded itself until the catalog projection shows it, and
forgets it when it stands by (another server took the catalog). The queue config is
read on each run, so adding, changing or removing a schedule holds from the next run; a
schedule whose timing changed begins again from the change (the ticks of its old timing
are not due under the new one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pinledger.ledger.clock import Clock
from pinledger.ledger.commands import NewJob
from pinledger.ledger.events import Actor, ScheduleTicked
from pinledger.ledger.times import format_ms
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import LedgerStore, QueueRow
from pinledger.service.observability import catalogue
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.duty import Duty, Schedule, Scope
from pinledger.service.queue_config import QueueConfig
from pinledger.service.schedules.due import due
from pinledger.service.schedules.spec import ScheduleSpec

log = logging.getLogger(__name__)

# Enqueue one job on a queue as a client's enqueueJobs would (queue, job, request id):
# its descriptor. The server sets it once its API exists (Handler.enqueue_scheduled).
ScheduledEnqueue = Callable[[str, NewJob, str], str]

SCHEDULES_EVERY_S = 1.0


class Schedules(Duty):
    name = "schedules"
    scope = Scope.CATALOG_OWNER

    def __init__(
        self,
        store: LedgerStore,
        writer: LedgerWriter,
        config: Callable[[], QueueConfig],
        queues: Callable[[], Iterable[QueueRow]],
        metrics: Metrics,
        clock: Clock,
        actor: Actor,
    ) -> None:
        self.store = store
        self.writer = writer
        self.config = config
        self.queues = queues
        self.metrics = metrics
        self.actor = actor
        self.enqueue: ScheduledEnqueue | None = None
        # (queue, schedule) -> the last tick this server recorded, until the catalog
        # projection shows it.
        self._recorded: dict[tuple[str, str], int] = {}
        # The schedules whose counters this server exports.
        self._exported: set[tuple[str, str]] = set()
        # How each schedule ticked when this server last ran it (ScheduleSpec.timing).
        self._timing: dict[tuple[str, str], tuple[object, ...]] = {}
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0, clock=clock)
        self.schedule = Schedule(SCHEDULES_EVERY_S)

    def stand_by(self) -> None:
        self._recorded.clear()
        self._timing.clear()

    def run(self, now_ms: int) -> list[tuple[str, str, int]]:
        """Enqueue every due tick; the (queue, schedule, tick) enqueued now."""
        if self.enqueue is None:
            return []
        wanted = [
            (queue, spec)
            for queue, settings in sorted(self.config().queues.items())
            for spec in settings.schedules
        ]
        if not wanted:
            return []
        existing = {row.name for row in self.queues()}
        last = {(t.queue, t.schedule): t.tick_ms for t in self.store.schedule_ticks()}
        enqueued = []
        for queue, spec in wanted:
            if queue not in existing:
                self._failures.warning(
                    "queue %r has schedules in the queue config but does not exist: "
                    "create it (createQueue; `pinledger client --mode create --queue Q`) "
                    "for them to run",
                    queue,
                )
                continue
            key = (queue, spec.name)
            if key not in self._exported:  # at 0 from the start, so that rate() works
                self._exported.add(key)
                for counter in (catalogue.SCHEDULE_TICKS, catalogue.SCHEDULE_TICKS_MISSED):
                    self.metrics.count(counter, 0, queue=queue, schedule=spec.name)
            recorded = max(last.get(key, -1), self._recorded.get(key, -1))
            if self._timing.setdefault(key, spec.timing) != spec.timing:
                # Changed (by a reload this server saw): its ticks begin again from now,
                # so that ticks the old timing never had are not counted missed.
                self._timing[key] = spec.timing
                recorded = -1
            try:
                tick = self._run_one(queue, spec, None if recorded < 0 else recorded, now_ms)
            except Exception as exc:  # one schedule's failure holds up no other
                self._failures.warning(
                    "schedule %r of queue %r: tick not enqueued, tried again in %g s: %s: %s",
                    spec.name,
                    queue,
                    SCHEDULES_EVERY_S,
                    type(exc).__name__,
                    exc,
                )
                continue
            if tick is not None:
                enqueued.append((queue, spec.name, tick))
        for key, tick in list(self._recorded.items()):
            if last.get(key, -1) >= tick:
                del self._recorded[key]  # the projection has it
        return enqueued

    def _run_one(
        self, queue: str, spec: ScheduleSpec, last_ms: int | None, now_ms: int
    ) -> int | None:
        assert self.enqueue is not None
        decision = due(spec, last_ms, now_ms)
        if decision.begins_ms is not None:
            self._record(ScheduleTicked(queue, spec.name, decision.begins_ms), now_ms)
            log.info(
                "schedule %r of queue %r begins (%s): its first tick is at %s",
                spec.name,
                queue,
                spec.when,
                format_ms(spec.next_after(decision.begins_ms), zulu=True),
            )
            return None
        tick = decision.tick_ms
        if tick is None:
            return None
        if decision.missed:
            log.warning(
                "schedule %r of queue %r: %d tick(s) before %s were due while no server "
                "ran the schedule; they are not run, the latest tick is run once "
                "(docs/guides/periodic-jobs.md#missed-ticks)",
                spec.name,
                queue,
                decision.missed,
                format_ms(tick, zulu=True),
            )
            self.metrics.count(
                catalogue.SCHEDULE_TICKS_MISSED, decision.missed, queue=queue, schedule=spec.name
            )
        job = NewJob(
            body=spec.body,
            priority=spec.priority,
            attempts_allowed=spec.attempts,
            unique_key=spec.key(tick),
            unique_for_ms=spec.key_window_ms(tick),
        )
        descriptor = self.enqueue(queue, job, spec.key(tick))
        self._record(ScheduleTicked(queue, spec.name, tick, descriptor), now_ms)
        self.metrics.count(catalogue.SCHEDULE_TICKS, 1, queue=queue, schedule=spec.name)
        return tick

    def _record(self, tick: ScheduleTicked, now_ms: int) -> None:
        self.writer.record_tick(tick, now_ms, self.actor)
        self._recorded[(tick.name, tick.schedule)] = tick.tick_ms
