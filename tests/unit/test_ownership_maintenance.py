"""The owner's maintenance, appended as events: which claims have timed out and which
finished jobs are due for garbage collection at a given time, and when each service
runs. Driven by a FakeClock and in-memory stand-ins for the writer and the store; the
claims an owner times out are read from the store (a FakeStore holding them)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

import pytest

from pinledger.ledger.events import (
    Actor,
    Checkpointed,
    Claimed,
    Collected,
    JobEvent,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.log import LogError
from pinledger.ledger.state import Job, JobState, Verdict
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import Transition
from pinledger.projections.store import PartitionBatch
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.claim_timeouts import ClaimTimeouts, timed_out
from pinledger.service.ownership.maintenance.garbage_collection import Collector, gc_cutoffs
from pinledger.service.ownership.maintenance.scheduler import Lane
from pinledger.service.ownership.partitions import Owned
from pinledger.service.ownership.sightings import Sightings
from tests.unit.factories import NOW, make_job
from tests.unit.ownership_fixtures import RecordingWriter, make_owned, make_partitions

TIMEOUT_S = 60.0
OWNER = Actor(source="pinledger:owner", server="s1")


class _Store:
    """Answers `expired` from a list of finished jobs, as the query would."""

    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self.asked: list[tuple[int, int]] = []

    def expired(
        self, queue: str, partition: int, succeeded_before: int, failed_before: int, limit: int
    ) -> list[Job]:
        self.asked.append((succeeded_before, failed_before))
        return [
            j
            for j in self.jobs
            if (j.state is JobState.SUCCEEDED and j.updated_at <= succeeded_before)
            or (j.state is JobState.FAILED and j.updated_at <= failed_before)
        ][:limit]


def _owned(
    partition: int, jobs: Sequence[Job], serving: bool = True, store: object = None
) -> Owned:
    # Maintenance never projects; it reads the store the partition serves from.
    return make_owned(partition, jobs, serving=serving, store=store)


def _seed(store: FakeStore, partition: int, jobs: Sequence[Job]) -> None:
    """Jobs of partition `partition` of queue mail, as its projection holds them."""
    topic = "p.q.mail"
    start = store.start_offset(topic, partition)  # as the queue's creation would
    store.commit_partition_batch(
        PartitionBatch("mail", topic, partition, start, start + 1, upserts=list(jobs))
    )


def _timed_out(parts: Sequence[Owned], now: int, timeout_ms: int) -> list[tuple[Owned, list[int]]]:
    """timed_out, as (partition, ids of the jobs timed out)."""
    found = timed_out(threading.Lock(), parts, now, timeout_ms)
    return [(owned, [h.job.local_id for h in held]) for owned, held in found]


def _claimed(local_id: int, touched_at: int) -> Job:
    return make_job(
        JobState.IN_PROGRESS, local_id=local_id, touched_at=touched_at, updated_at=touched_at
    )


def test_claims_not_renewed_within_the_timeout_time_out_once() -> None:
    clock = FakeClock()
    now = clock.now_ms()
    timeout_ms = int(TIMEOUT_S * 1000)
    fresh = _claimed(1, touched_at=now - timeout_ms + 1)
    stale = _claimed(2, touched_at=now - timeout_ms)
    store = FakeStore()
    _seed(store, 0, [fresh, stale])
    owned = _owned(0, [], store=store)
    assert _timed_out([owned], now, timeout_ms) == [(owned, [2])]
    # Its timeout is on its way through the log: not appended a second time.
    assert _timed_out([owned], now, timeout_ms) == []
    clock.advance(0.001)
    assert [ids for _, ids in _timed_out([owned], clock.now_ms(), timeout_ms)] == [[1]]


def test_a_renewed_claim_times_out_again_from_its_renewal() -> None:
    # (moved from the ready buffer's tests: the claims are read from the store now)
    claimed = make_job(JobState.IN_PROGRESS, local_id=5, touched_at=NOW - 700_000)
    store = FakeStore()
    _seed(store, 0, [claimed])
    owned = _owned(0, [], store=store)
    assert _timed_out([owned], NOW, 600_000) == [(owned, [5])]
    assert _timed_out([owned], NOW, 600_000) == []  # already on its way to the log
    renewed = claimed._replace(touched_at=NOW)
    _seed(store, 0, [renewed])
    assert _timed_out([owned], NOW + 600_000, 600_000) == [(owned, [5])]


def test_partitions_still_catching_up_are_left_alone() -> None:
    now = FakeClock().now_ms()
    store = FakeStore()
    _seed(store, 0, [_claimed(1, touched_at=now - 10 * 60_000)])
    owned = _owned(0, [], serving=False, store=store)
    assert _timed_out([owned], now, 60_000) == []


def test_claim_timeouts_are_appended_and_retried_when_the_append_failed() -> None:
    clock = FakeClock()
    now = clock.now_ms()
    writer = RecordingWriter()
    owned = _owned(3, [])
    partitions = make_partitions(owned)
    owned.projector.store = partitions.store
    _seed(
        cast(FakeStore, partitions.store),
        3,
        [_claimed(1, touched_at=now - 61_000), _claimed(2, touched_at=now)],
    )
    timeouts = ClaimTimeouts(partitions, cast(LedgerWriter, writer), Metrics(), OWNER, TIMEOUT_S)
    writer.failing = True
    with pytest.raises(LogError):
        timeouts.run(now)
    writer.failing = False
    assert timeouts.run(now) == 1
    assert [(q, p, [type(e) for e in events]) for q, p, events in writer.appended] == [
        ("mail", 3, [TimedOut])
    ]
    event = writer.appended[0][2][0]
    assert isinstance(event, TimedOut) and event.local_id == 1
    assert timeouts.run(now) == 0  # not twice


def test_a_claim_the_owner_saw_touched_within_the_timeout_is_kept_whatever_its_stamp() -> None:
    # Both stamped 700 s ago (a lagging server's clock took the heartbeat of job 1);
    # the owner saw job 1's heartbeat 10 s ago by its own clock, job 2's never.
    store = FakeStore()
    _seed(store, 0, [_claimed(1, touched_at=NOW - 700_000), _claimed(2, NOW - 700_000)])
    owned = _owned(0, [], store=store)
    owned.sightings = Sightings(since=1000.0, touched={1: 2000.0})
    found = timed_out(threading.Lock(), [owned], NOW, 600_000, seen_now=2010.0)
    assert [[h.job.local_id for h in held] for _, held in found] == [[2]]
    # A timeout later by the owner's clock, job 1 times out too.
    found = timed_out(threading.Lock(), [owned], NOW, 600_000, seen_now=2600.0)
    assert [[h.job.local_id for h in held] for _, held in found] == [[1]]


def test_a_partition_assigned_within_the_timeout_times_no_claim_out() -> None:
    # The new owner never saw these claims touched: each gets a full timeout from the
    # assignment (a stamp may come from a lagging clock).
    store = FakeStore()
    _seed(store, 0, [_claimed(1, touched_at=NOW - 700_000)])
    owned = _owned(0, [], store=store)
    owned.sightings = Sightings(since=1000.0)
    assert timed_out(threading.Lock(), [owned], NOW, 600_000, seen_now=1599.0) == []
    found = timed_out(threading.Lock(), [owned], NOW, 600_000, seen_now=1600.0)
    assert [[h.job.local_id for h in held] for _, held in found] == [[1]]


def test_the_owner_notes_claims_and_applied_checkpoints_and_forgets_ended_claims() -> None:
    sightings = Sightings(since=0.0)
    pending = make_job(JobState.PENDING, local_id=1)
    claimed = make_job(JobState.IN_PROGRESS, local_id=1, touched_at=NOW)
    ok, rejected = Verdict(True), Verdict(False, "checkpoint: stale claim")

    def t(event: JobEvent, before: Job, after: Job, verdict: Verdict = ok) -> Transition:
        return Transition(1, event, before, after, verdict, NOW, None)

    sightings.note([t(Claimed(local_id=1, claim="c"), pending, claimed)], 5.0)
    assert sightings.touched == {1: 5.0}
    sightings.note([t(Checkpointed(local_id=1, claim="old"), claimed, claimed, rejected)], 6.0)
    assert sightings.touched == {1: 5.0}  # a stale heartbeat renews nothing
    sightings.note([t(Checkpointed(local_id=1, claim="c"), claimed, claimed)], 7.0)
    assert sightings.touched == {1: 7.0}
    done = make_job(JobState.SUCCEEDED, local_id=1)
    sightings.note([t(Succeeded(local_id=1, claim="c"), claimed, done)], 8.0)
    assert sightings.touched == {}


def test_at_most_a_limit_of_claims_time_out_per_run_and_the_rest_next() -> None:
    store = FakeStore()
    _seed(store, 0, [_claimed(i, touched_at=NOW - 700_000 + i) for i in range(5)])
    owned = _owned(0, [], store=store)
    lock = threading.Lock()
    first = timed_out(lock, [owned], NOW, 600_000, limit=3)
    assert [[h.job.local_id for h in held] for _, held in first] == [[0, 1, 2]]
    second = timed_out(lock, [owned], NOW, 600_000, limit=3)
    assert [[h.job.local_id for h in held] for _, held in second] == [[3, 4]]


def test_finished_jobs_past_their_ttl_are_collected() -> None:
    clock = FakeClock()
    now = clock.now_ms()
    day = 86_400_000
    jobs = [
        make_job(JobState.SUCCEEDED, local_id=1, updated_at=now - day),  # due
        make_job(JobState.SUCCEEDED, local_id=2, updated_at=now - day + 1),  # not yet
        make_job(JobState.FAILED, local_id=3, updated_at=now - day),  # failed TTL is longer
        make_job(JobState.FAILED, local_id=4, updated_at=now - 7 * day),  # due
    ]
    store, writer = _Store(jobs), RecordingWriter()
    collector = Collector(
        make_partitions(_owned(0, [], store=store), _owned(1, [], serving=False, store=store)),
        cast(LedgerWriter, writer),
        Metrics(),
        OWNER,
        succeeded_ttl_s=86_400,
        failed_ttl_s=7 * 86_400,
        gc_interval_s=60,
    )
    assert collector.run(now) == 2
    assert store.asked == [gc_cutoffs(now, day, 7 * day)]  # the serving partition only
    [(_, partition, events)] = writer.appended
    assert partition == 0
    assert [e.local_id for e in events if isinstance(e, Collected)] == [1, 4]


def test_gc_cutoffs_are_now_minus_each_ttl() -> None:
    assert gc_cutoffs(10_000, 1_000, 3_000) == (9_000, 7_000)


class _CountedTimeouts(ClaimTimeouts):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs: list[int] = []

    def run(self, now_ms: int) -> int:
        self.runs.append(now_ms)
        return super().run(now_ms)


class _CountedCollector(Collector):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs: list[int] = []

    def run(self, now_ms: int, limit: int = 1) -> int:
        self.runs.append(now_ms)
        return super().run(now_ms, limit)


class _Broken(ClaimTimeouts):
    name = "broken"

    def run(self, now_ms: int) -> int:
        raise LogError("the log is down")


def test_timeouts_run_every_second_and_gc_after_its_interval() -> None:
    """The owner lane: claim timeouts at the owner's first pass, then every second;
    collection after its first interval."""
    clock = FakeClock()
    parts, writer = make_partitions(), cast(LedgerWriter, RecordingWriter())
    timeouts = _CountedTimeouts(parts, writer, Metrics(), OWNER, TIMEOUT_S)
    collector = _CountedCollector(parts, writer, Metrics(), OWNER, 60, 60, gc_interval_s=30)
    owner_lane = Lane("owner", [timeouts, collector], clock, lambda: False, None)
    owner_lane.run_due()
    assert len(timeouts.runs) == 1 and collector.runs == []
    clock.advance(0.5)
    owner_lane.run_due()
    assert len(timeouts.runs) == 1
    clock.advance(0.5)
    owner_lane.run_due()
    assert timeouts.runs[-1] == clock.now_ms() and len(timeouts.runs) == 2
    clock.advance(29)
    owner_lane.run_due()
    assert collector.runs == [clock.now_ms()]


def test_an_error_of_an_owner_thread_duty_fails_the_pass() -> None:
    """On the owner thread a duty's error is the pass's (the owner loop logs it, reloads
    its partitions and backs off): the round ends there, and the duty runs again at its
    next interval."""
    clock = FakeClock()
    parts, writer = make_partitions(), cast(LedgerWriter, RecordingWriter())
    broken = _Broken(parts, writer, Metrics(), OWNER, TIMEOUT_S)
    timeouts = _CountedTimeouts(parts, writer, Metrics(), OWNER, TIMEOUT_S)
    owner_lane = Lane("owner", [broken, timeouts], clock, lambda: False, None)
    with pytest.raises(LogError, match="the log is down"):
        owner_lane.run_due()
    assert owner_lane.health["broken"].failure == "LogError: the log is down"
    assert timeouts.runs == []
    assert owner_lane.until_next() == 0  # the other duty is still due
    clock.advance(1)
    with pytest.raises(LogError):
        owner_lane.run_due()
    assert owner_lane.health["broken"].failures_in_a_row == 2
