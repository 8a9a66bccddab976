"""The one scheduler of the periodic duties (duty.py), as River's queue maintainer
(internal/maintenance/queue_maintainer.go) starts and stops every maintenance service
behind one interface.

Duties run in lanes: a lane's duties run one after the other, in the lane's order,
each when its schedule says, on one thread. The lanes are listed in one place
(duties.py, `Duties.lanes`):

- `owner`, on the owner thread, once per pass (loop.py calls `run_due`): claim timeouts
  and garbage collection read the owned partitions' state, and a partition whose store
  shard fails them is dropped (`Partitions.pause`), which only the owner thread may do.
  There a duty's error fails the pass like any error of the pass: the owner loop logs
  it, reloads its partitions and backs off (loop.py);
- the others on a thread each, whose name they give. There a duty's error is logged
  (one line when it starts failing or fails differently, one when it works again), the
  duty runs again after its backoff (`Schedule.retry_s`), and the lane's other duties
  run on as if nothing happened.

A lane's thread waits on the clock for its next due duty and ends at once when `stop`
is set (a duty already running finishes its run first).

Health: each duty's last run and whether it failed (`Lane.health`), and each lane's
progress, the end of its last round (`Scheduler.loop`: the members lane is /health's
`members` loop and pinledger_loop_lag_seconds{loop="members"}).

State: a lane's schedule and health are written by the thread that runs it; the health
is read by other threads whole (values replaced, never changed in place).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pinledger.ledger.clock import Clock
from pinledger.service.observability.health import Loop
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.ownership.maintenance.duty import Duty, Scope

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DutyHealth:
    """A duty's last run: when it ended (monotonic; None before the first), the error
    it raised (None when it worked), and how many runs in a row failed."""

    ran_at: float | None = None
    failure: str | None = None
    failures_in_a_row: int = 0


class Lane:
    """Duties run in order on one thread: `thread` names the lane's own thread, or None
    for the owner thread, which calls `run_due` once per pass and gets the errors."""

    def __init__(
        self,
        name: str,
        duties: Sequence[Duty],
        clock: Clock,
        leads: Callable[[], bool],
        thread: str | None,
    ) -> None:
        """`leads`: whether this server owns the catalog's partition now (what a
        CATALOG_OWNER duty runs on)."""
        self.name = name
        self.duties = tuple(duties)
        self.thread = thread
        self._clock = clock
        self._leads = leads
        # When each duty runs next (monotonic), counted from the lane's first round.
        self._due: dict[str, float] | None = None
        self.health = {duty.name: DutyHealth() for duty in self.duties}
        # When the lane last finished a round, whether its duties worked or not.
        self.progressed_at = clock.monotonic()
        self._noise = RateLimitedLog(log, burst=3, window_s=60.0, clock=clock)

    def until_next(self) -> float:
        """Seconds until the next duty is due (0: now)."""
        now = self._clock.monotonic()
        return max(0.0, min(self._schedule(now).values(), default=now) - now)

    def run_due(self) -> None:
        """One round: every duty that is due, in order. On the owner thread, a duty's
        error ends the round and is raised. Each duty that ran runs next counted from
        the round's end, so that duties of one interval keep running together, in
        order."""
        now = self._clock.monotonic()
        due = self._schedule(now)
        now_ms: int | None = None  # read once a duty is due: most owner passes run none
        ran: list[Duty] = []
        try:
            for duty in self.duties:
                if due[duty.name] > now:
                    continue
                if now_ms is None:
                    now_ms = self._clock.now_ms()
                ran.append(duty)
                try:
                    if duty.scope is Scope.CATALOG_OWNER and not self._leads():
                        duty.stand_by()
                    else:
                        duty.run(now_ms)
                except Exception as exc:
                    self._ran(duty, exc)
                    if self.thread is None:
                        raise
                else:
                    self._ran(duty, None)
        finally:
            ended = self._clock.monotonic()
            for duty in ran:
                failures = self.health[duty.name].failures_in_a_row
                due[duty.name] = ended + duty.schedule.after(failures)
            self.progressed_at = ended

    def _schedule(self, now: float) -> dict[str, float]:
        if self._due is None:
            self._due = {
                d.name: now if d.schedule.at_once else now + d.schedule.every_s for d in self.duties
            }
        return self._due

    def _ran(self, duty: Duty, exc: Exception | None) -> None:
        """Note a run's outcome and log what changed."""
        before = self.health[duty.name]
        ended = self._clock.monotonic()
        if exc is None:
            after = DutyHealth(ran_at=ended)
            if before.failure is not None and self.thread is not None:
                log.info(
                    "%s works again after %d failed run(s)", duty.name, before.failures_in_a_row
                )
        else:
            failure = f"{type(exc).__name__}: {exc}"
            after = DutyHealth(ended, failure, before.failures_in_a_row + 1)
            if failure != before.failure and self.thread is not None:
                self._noise.warning(
                    "%s failed: %s; it runs again in %g s, and on until it works",
                    duty.name,
                    failure,
                    duty.schedule.after(after.failures_in_a_row),
                )
        self.health = {**self.health, duty.name: after}


class Scheduler:
    """Every periodic duty of a server, in its lanes: `start` starts the lanes that have
    a thread; the owner lane runs when the owner loop calls it; `stop` (the event) ends
    them and `join` waits for them."""

    def __init__(self, lanes: Sequence[Lane], clock: Clock, stop: threading.Event) -> None:
        self.lanes = {lane.name: lane for lane in lanes}
        self._clock = clock
        self._stop = stop
        self._threads = {
            lane.name: threading.Thread(
                target=self._run, args=(lane,), name=lane.thread, daemon=True
            )
            for lane in lanes
            if lane.thread is not None
        }

    @property
    def duties(self) -> list[Duty]:
        """Every duty, lane by lane, in order."""
        return [duty for lane in self.lanes.values() for duty in lane.duties]

    def lane(self, name: str) -> Lane:
        return self.lanes[name]

    def health(self) -> dict[str, DutyHealth]:
        """Each duty's last run, by name."""
        return {name: h for lane in self.lanes.values() for name, h in lane.health.items()}

    def loop(self, name: str) -> Loop:
        """A lane with a thread as /health watches it: alive while its thread runs,
        progressing at the end of each round."""
        lane, thread = self.lanes[name], self._threads[name]
        return Loop(thread.is_alive, lambda: lane.progressed_at)

    def start(self) -> None:
        for thread in self._threads.values():
            thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait for the lanes' threads to end (`stop` set), up to `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s  # real time: threads end in real time
        for thread in self._threads.values():
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self, lane: Lane) -> None:
        while not self._clock.sleep(lane.until_next(), self._stop):
            lane.run_due()
