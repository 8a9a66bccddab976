"""The one scheduler of the periodic duties (service/ownership/maintenance/scheduler.py):
each duty at its interval on the clock, a duty's error logged once and retried after its
backoff while the others run on, the catalog's duties on its owner alone, a stop that
does not wait out an interval, and every duty the server builds registered with it."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
import threading
import time

import pytest

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.fake_clock import FakeClock
from pinledger.projections.store import StoreUnavailableError
from pinledger.service.ownership import maintenance
from pinledger.service.ownership.maintenance.duties import Duties
from pinledger.service.ownership.maintenance.duty import Duty, Schedule, Scope
from pinledger.service.ownership.maintenance.scheduler import Lane, Scheduler
from pinledger.service.testing.runtime import TEST_CONFIG, Runtime, wait_until

SCHEDULER_LOG = "pinledger.service.ownership.maintenance.scheduler"


class _Duty(Duty):
    """Notes when it ran (seconds since it was made, on its clock); fails while `failing`
    says why."""

    name = "steady"

    def __init__(self, clock: Clock, schedule: Schedule) -> None:
        self.clock = clock
        self.made = clock.monotonic()
        self.schedule = schedule
        self.runs: list[float] = []
        self.stood_by: list[float] = []
        self.failing: str | None = None

    def run(self, now_ms: int) -> None:
        self.runs.append(self.clock.monotonic() - self.made)
        if self.failing is not None:
            raise StoreUnavailableError(self.failing)

    def stand_by(self) -> None:
        self.stood_by.append(self.clock.monotonic() - self.made)


class _Flaky(_Duty):
    name = "flaky"


class _OnTheCatalogOwner(_Duty):
    name = "catalog-work"
    scope = Scope.CATALOG_OWNER


def _step(lane: Lane, clock: FakeClock, until_s: float, step_s: float = 0.5) -> None:
    """Run the lane as its thread would, the clock moving `step_s` at a time."""
    while clock.monotonic() - 1000.0 <= until_s:
        if lane.until_next() == 0:
            lane.run_due()
        clock.advance(step_s)


def test_each_duty_runs_at_its_interval_from_the_lanes_start() -> None:
    clock = FakeClock()
    at_once = _Duty(clock, Schedule(3.0, at_once=True))
    later = _Flaky(clock, Schedule(5.0))
    lane = Lane("test", [at_once, later], clock, lambda: True, "test")
    clock.advance(7)  # built, not started: the intervals count from the lane's start
    _step(lane, clock, until_s=22)
    assert at_once.runs == [7, 10, 13, 16, 19, 22]
    assert later.runs == [12, 17, 22]


class _Slow(_Duty):
    """Takes `takes_s` of the fake clock's time to run."""

    def __init__(self, clock: FakeClock, schedule: Schedule, takes_s: float) -> None:
        super().__init__(clock, schedule)
        self.fake_clock = clock
        self.takes_s = takes_s

    def run(self, now_ms: int) -> None:
        super().run(now_ms)
        self.fake_clock.advance(self.takes_s)


class _SlowToo(_Slow):
    name = "slow-too"


def test_duties_of_one_interval_run_together_in_order_however_long_they_take() -> None:
    """As the members tick ran them: the ledger format, then the resizes that write with
    it, in one round every interval, not drifting apart by their run times."""
    clock = FakeClock()
    first = _Slow(clock, Schedule(2.0), takes_s=0.3)
    second = _SlowToo(clock, Schedule(2.0), takes_s=0.5)
    lane = Lane("test", [first, second], clock, lambda: True, "test")
    for _ in range(4):
        clock.advance(lane.until_next())
        lane.run_due()
    assert first.runs == pytest.approx([2.0, 4.8, 7.6, 10.4])
    assert second.runs == [pytest.approx(t + 0.3) for t in first.runs]


def test_a_failing_duty_is_logged_once_retried_after_its_backoff_and_the_others_run_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=SCHEDULER_LOG)
    clock = FakeClock()
    flaky = _Flaky(clock, Schedule(10.0, at_once=True, retry_s=1.0))
    steady = _Duty(clock, Schedule(2.0, at_once=True))
    lane = Lane("test", [flaky, steady], clock, lambda: True, "test")
    flaky.failing = "store shard 'b': down"
    _step(lane, clock, until_s=30)
    # 1 s after the first failure, doubling up to the interval.
    assert flaky.runs == [0, 1, 3, 7, 15, 25]
    assert steady.runs == [float(t) for t in range(0, 31, 2)]
    health = lane.health["flaky"]
    assert health.failure == "StoreUnavailableError: store shard 'b': down"
    assert health.failures_in_a_row == 6 and health.ran_at == 1025.0
    assert lane.health["steady"].failure is None
    assert lane.progressed_at == 1030.0

    flaky.failing = None
    _step(lane, clock, until_s=50)
    assert flaky.runs[6:] == [35, 45]
    assert lane.health["flaky"].failure is None
    said = [r.getMessage() for r in caplog.records if r.name == SCHEDULER_LOG]
    assert said == [
        "flaky failed: StoreUnavailableError: store shard 'b': down; it runs again in 1 s, "
        "and on until it works",
        "flaky works again after 6 failed run(s)",
    ]


def test_a_duty_without_a_retry_runs_again_at_its_interval_after_a_failure() -> None:
    clock = FakeClock()
    duty = _Duty(clock, Schedule(2.0))
    duty.failing = "down"
    lane = Lane("test", [duty], clock, lambda: True, "test")
    _step(lane, clock, until_s=8)
    assert duty.runs == [2, 4, 6, 8]


def test_a_catalog_owner_duty_runs_on_the_catalogs_owner_and_stands_by_elsewhere() -> None:
    clock = FakeClock()
    leads = [False]
    duty = _OnTheCatalogOwner(clock, Schedule(2.0, at_once=True))
    lane = Lane("test", [duty], clock, lambda: leads[0], "test")
    _step(lane, clock, until_s=2)
    leads[0] = True  # a failover: this server owns the catalog now
    _step(lane, clock, until_s=6)
    leads[0] = False
    _step(lane, clock, until_s=8)
    assert duty.stood_by == [0, 2, 8]
    assert duty.runs == [4, 6]


def test_the_lanes_threads_survive_a_duty_that_raises_and_stop_at_once() -> None:
    """On the real clock: a lane whose duties failed keeps its thread; a stop ends a
    lane waiting out a ten-minute interval at once."""
    stop = threading.Event()
    flaky = _Flaky(SYSTEM_CLOCK, Schedule(600.0, at_once=True))
    flaky.failing = "down"
    steady = _Duty(SYSTEM_CLOCK, Schedule(600.0, at_once=True))
    lane = Lane("test", [flaky, steady], SYSTEM_CLOCK, lambda: True, "test-lane")
    scheduler = Scheduler([lane], SYSTEM_CLOCK, stop)
    scheduler.start()
    loop = scheduler.loop("test")
    wait_until(lambda: len(steady.runs) == 1, "the lane's first round")
    assert loop.alive() and len(flaky.runs) == 1
    assert lane.health["flaky"].failures_in_a_row == 1
    started = time.monotonic()
    stop.set()
    scheduler.join(timeout_s=5)
    assert time.monotonic() - started < 0.5
    assert not loop.alive()


# -- the duties a server runs ------------------------------------------------------------

# Every periodic duty: its lane (the owner thread's pass or a thread of its own) and
# which servers do its work. Adaptation closes its windows on every server; the
# catalog's owner alone resizes (adaptation.py).
WHERE = {
    "claim-timeouts": ("owner", Scope.EVERY_SERVER),
    "garbage-collection": ("owner", Scope.EVERY_SERVER),
    "ledger-format": ("members", Scope.EVERY_SERVER),
    "queue-sizes": ("members", Scope.CATALOG_OWNER),
    "retirement": ("members", Scope.CATALOG_OWNER),
    "adaptation": ("members", Scope.EVERY_SERVER),
    "members": ("members", Scope.EVERY_SERVER),
    "timeline-retention": ("timeline-retention", Scope.EVERY_SERVER),
    "schedules": ("schedules", Scope.CATALOG_OWNER),
    "queue-gauges": ("queue-gauges", Scope.CATALOG_OWNER),
}


def _duty_classes() -> set[type[Duty]]:
    """Every duty defined in the maintenance package's modules."""
    found: set[type[Duty]] = set()
    for module in pkgutil.iter_modules(maintenance.__path__):
        loaded = importlib.import_module(f"{maintenance.__name__}.{module.name}")
        found |= {
            value
            for value in vars(loaded).values()
            if isinstance(value, type)
            and issubclass(value, Duty)
            and value is not Duty
            and value.__module__ == loaded.__name__
        }
    return found


def test_every_periodic_duty_the_server_builds_runs_under_the_one_scheduler() -> None:
    config = dataclasses.replace(TEST_CONFIG, queue_metrics_interval_s=15.0)
    with Runtime(config) as rt:
        node = rt.node(start=False)
        scheduler = node.owner.scheduler
        built = [getattr(node.owner.duties, f.name) for f in dataclasses.fields(Duties)]
        duties = [d for d in built if isinstance(d, Duty)]
        assert scheduler.duties == duties  # each once, in the builder's order
        assert {type(d) for d in duties} == _duty_classes()
        assert {
            d.name: (lane.name, d.scope) for lane in scheduler.lanes.values() for d in lane.duties
        } == WHERE
        assert {lane.name: lane.thread for lane in scheduler.lanes.values()} == {
            "owner": None,  # run by the owner loop's pass
            "members": "owner-members",
            "timeline-retention": "timeline-retention",
            "schedules": "schedules",
            "queue-gauges": "queue-gauges",
        }
        # Each interval from the config, or the room's own constant.
        assert {d.name: d.schedule.every_s for d in duties} == {
            "claim-timeouts": 1.0,
            "garbage-collection": config.gc_interval_s,
            "ledger-format": 2.0,
            "queue-sizes": 2.0,
            "retirement": 2.0,
            "adaptation": 2.0,
            "members": 2.0,
            "timeline-retention": 600.0,
            "schedules": 1.0,
            "queue-gauges": 15.0,
        }


def test_the_members_loop_of_health_is_the_members_lane() -> None:
    """/health's `members` loop (and pinledger_loop_lag_seconds{loop="members"}): alive
    while the lane's thread runs, progressing on each members tick (every 2 s)."""
    with Runtime() as rt:
        node = rt.node()
        loop = node.owner.scheduler.loop("members")
        assert loop.alive()
        before = loop.progressed_at()
        rt.advance_until(lambda: loop.progressed_at() >= before + 2, "a members tick")
        node.stop()
        assert not loop.alive()
