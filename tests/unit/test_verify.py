"""`pinledger replay`'s verify (projections/verify.py) on the fakes: a consistent
projection verifies identical, with one pass or range by range, and any one row changed,
removed or added behind the projection's back is reported, in the table it is in."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinledger.ledger.events import Actor
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import ProjectionRunner, Scope
from pinledger.projections.verify import partition_tasks, verify, verify_partition
from pinledger.projections.verify_fold import IdRange, TableDiff, compare_sorted
from tests.integration.workload import Workload

ADMIN = Actor(source="test:admin", request_id="", server="test")
PREFIX = "t."


def _projected(seed: int, steps: int, partitions: int = 2) -> tuple[FakeStore, FakeLog]:
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("q", partitions, 0, ADMIN)
    # Keyed enqueues too: their fold (decision 0037) must verify identical range by
    # range, where a key's holder may sit in another range.
    Workload(writer, "q", partitions, seed=seed, keys=True).run(steps)
    store = FakeStore()
    store.migrate()
    runner = ProjectionRunner(store, log, PREFIX)
    try:
        runner.catch_up()
    finally:
        runner.close()
    return store, log


def _diff(report_diffs: list[TableDiff], table: str) -> tuple[int, int]:
    found = next(d for d in report_diffs if d.table == table)
    return found.only_live, found.only_replay


SEEDS = st.integers(min_value=0, max_value=10_000)
STEPS = st.integers(min_value=1, max_value=60)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(SEEDS, STEPS, st.sampled_from([None, 1, 5, 40]))
def test_a_consistent_projection_verifies_identical(
    seed: int, steps: int, max_jobs: int | None
) -> None:
    store, log = _projected(seed, steps)
    report = verify(store, log, PREFIX, Scope(), max_jobs=max_jobs or 500_000)
    assert report.identical, report.diffs
    timeline = sum(
        len(store.job_events("q", p, local_id))
        for p in range(2)
        for local_id in {k[2] for k in store._events if k[1] == p}
    )
    assert report.events == timeline, "every event is compared exactly once"


@FAST
@given(SEEDS, STEPS, st.data())
def test_any_changed_job_row_is_reported(seed: int, steps: int, data: st.DataObject) -> None:
    store, log = _projected(seed, steps)
    if not store._jobs:
        return
    key = data.draw(st.sampled_from(sorted(store._jobs)), label="job")
    job, traceparent = store._jobs[key]
    change = data.draw(st.sampled_from(["status", "attempts", "trace", "gone"]), label="change")
    if change == "status":
        store._jobs[key] = (
            job._replace(custom_status=job.custom_status + "!"),
            traceparent,
        )
    elif change == "attempts":
        store._jobs[key] = (
            job._replace(attempts_allowed=job.attempts_allowed + 1),
            traceparent,
        )
    elif change == "trace":
        store._jobs[key] = (job, "00-tampered")
    else:
        del store._jobs[key]
    report = verify(store, log, PREFIX, Scope(), max_jobs=data.draw(st.sampled_from([3, 500_000])))
    assert _diff(report.diffs, "jobs") == ((0, 1) if change == "gone" else (1, 1))
    assert _diff(report.diffs, "job_events") == (0, 0)


@FAST
@given(SEEDS, STEPS, st.data())
def test_any_changed_timeline_row_is_reported(seed: int, steps: int, data: st.DataObject) -> None:
    store, log = _projected(seed, steps)
    key = data.draw(st.sampled_from(sorted(store._events)), label="event")
    row = store._events[key]
    change = data.draw(st.sampled_from(["verdict", "detail", "gone", "extra"]), label="change")
    if change == "verdict":
        store._events[key] = row._replace(server=row.server + "!")
    elif change == "detail":
        store._events[key] = row._replace(detail={**row.detail, "x": 1})
    elif change == "gone":
        del store._events[key]
    else:
        extra = row._replace(idx=row.idx + 10_000)
        store._events[(*key[:4], extra.idx)] = extra
    report = verify(store, log, PREFIX, Scope(), max_jobs=data.draw(st.sampled_from([3, 500_000])))
    expected = {"gone": (0, 1), "extra": (1, 0)}.get(change, (1, 1))
    assert _diff(report.diffs, "job_events") == expected
    assert _diff(report.diffs, "jobs") == (0, 0)


def test_a_partition_and_a_queue_can_be_verified_alone() -> None:
    store, log = _projected(7, 40)
    whole = verify(store, log, PREFIX, Scope())
    one = verify(store, log, PREFIX, Scope(queues=frozenset({"q"}), partition=1))
    assert whole.identical and one.identical
    assert 0 < one.events < whole.events


def test_a_removed_queue_row_is_reported() -> None:
    store, log = _projected(3, 10)
    del store._queues["q"]
    report = verify(store, log, PREFIX, Scope())
    assert _diff(report.diffs, "queues") == (0, 1)


@given(
    st.lists(st.integers(0, 30), unique=True).map(sorted),
    st.lists(st.integers(0, 30), unique=True).map(sorted),
)
def test_a_merge_counts_what_each_side_lacks(left: list[int], right: list[int]) -> None:
    diff = TableDiff("t")
    compare_sorted(left, right, lambda x: x, diff, lambda x: x, samples=100)
    assert diff.only_replay == len(set(left) - set(right))
    assert diff.only_live == len(set(right) - set(left))
    assert diff.replay_samples == sorted(set(left) - set(right))


@pytest.mark.parametrize(
    ("local_id", "offset", "first", "second"),
    [
        (5 * 1000 + 2, 7, True, False),  # enqueued at offset 5: the first range's job
        (30 * 1000, 40, False, True),  # the second range's job
        (35 * 1000, 12, True, False),  # named before it exists: the range read at 12
        (35 * 1000, 25, False, True),
    ],
)
def test_every_timeline_row_belongs_to_exactly_one_range(
    local_id: int, offset: int, first: bool, second: bool
) -> None:
    ranges = IdRange(None, 20 * 1000), IdRange(20 * 1000, None)
    assert (ranges[0].owns(local_id, offset), ranges[1].owns(local_id, offset)) == (first, second)


def test_a_partition_holding_more_than_max_jobs_is_folded_range_by_range() -> None:
    store, log = _projected(5, 60, partitions=1)
    assert len(store._jobs) > 6
    task = partition_tasks(store, PREFIX, Scope())[0]
    ranged = verify_partition(store, log, task, max_jobs=3)
    whole = verify_partition(store, log, task)
    assert ranged.passes > 2 and whole.passes == 1
    assert ranged.events == whole.events
    assert (ranged.jobs.only_live, ranged.job_events.only_live) == (0, 0)
