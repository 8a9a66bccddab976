"""The Store contract for the timeline's day partitions (projections/store.py
DayPartitionStore): the same tests on every kind of store (store_fixtures.py)."""

from __future__ import annotations

from pinledger.ledger.events import Actor, Claimed, Enqueued, Succeeded
from pinledger.ledger.log import queue_topic
from pinledger.projections.day_partitions import DAY_MS, DayPartition, day_start
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import PREFIX, store
from tests.contract.test_store_contract import FakeLog, _create_queues

__all__ = ["store"]  # the fixture, used by name

WORKER = Actor("svc:worker", "r1", "s1")
DAY0 = day_start(1_700_000_000_000)


def _enqueued() -> Enqueued:
    return Enqueued(body=b"x", priority=1, run_after=0, attempts_allowed=1)


def _three_days(store: LedgerStore) -> str:
    """Queue "h": job 0 enqueued on day 0, claimed on day 1, acked on day 2; job 2001
    enqueued and acked on day 2."""
    _create_queues(store, ("h", 1))
    topic = queue_topic(PREFIX, "h")
    log = FakeLog(topic, 0)
    log.append(DAY0 + 5, WORKER, _enqueued())
    log.append(DAY0 + DAY_MS + 5, WORKER, Claimed(0, "c1"))
    log.append(DAY0 + 2 * DAY_MS + 5, WORKER, Succeeded(0, ""), _enqueued())
    log.append(DAY0 + 2 * DAY_MS + 6, WORKER, Claimed(2001, "c2"))
    PartitionProjector(store, "h", topic, 0).apply(log.records)
    return topic


def _day(n: int) -> DayPartition:
    return DayPartition(DAY0 + n * DAY_MS, DAY0 + (n + 1) * DAY_MS)


def test_a_fresh_store_has_no_day_partitions(store: LedgerStore) -> None:
    assert store.day_partitions() == []


def test_events_of_any_day_are_written_into_partitions_made_for_them(
    store: LedgerStore,
) -> None:
    _three_days(store)
    assert store.day_partitions() == [_day(0), _day(1), _day(2)]
    assert [r.type for r in store.job_events("h", 0, 0)] == ["enq", "clm", "ok"]


def test_partitions_are_made_ahead_once(store: LedgerStore) -> None:
    # On every store shard: each has a timeline of its own.
    assert store.ensure_day_partitions(DAY0 + 10, DAY0 + 2 * DAY_MS + 1) == 3 * len(store.shards())
    assert store.ensure_day_partitions(DAY0, DAY0 + DAY_MS) == 0
    assert store.ensure_day_partitions(DAY0, DAY0) == 0
    assert store.day_partitions() == [_day(0), _day(1), _day(2)]
    assert _day(0).name == "job_events_p20231114"


def test_dropping_history_drops_whole_partitions_older_than_the_cutoff(
    store: LedgerStore,
) -> None:
    _three_days(store)
    # Day 1 ends at DAY0 + 2 days: a cut-off inside day 2 drops days 0 and 1 only.
    assert store.drop_day_partitions_before(DAY0 + 2 * DAY_MS + 1) == 2
    assert store.day_partitions() == [_day(2)]
    assert [r.type for r in store.job_events("h", 0, 0)] == ["ok"]
    assert [r.type for r in store.job_events("h", 0, 2001)] == ["enq", "clm"]
    # The jobs themselves stay.
    assert {row.job.local_id for row in store.lookup("h", [(0, 0), (0, 2001)], False)} == {
        0,
        2001,
    }
    assert store.drop_day_partitions_before(DAY0 + 2 * DAY_MS + 1) == 0


def test_a_cutoff_inside_a_partition_keeps_it(store: LedgerStore) -> None:
    _three_days(store)
    assert store.drop_day_partitions_before(DAY0 + DAY_MS - 1) == 0
    assert store.drop_day_partitions_before(DAY0 + DAY_MS) == 1
    assert store.day_partitions() == [_day(1), _day(2)]


def test_an_event_of_a_dropped_day_is_written_again(store: LedgerStore) -> None:
    topic = _three_days(store)
    assert store.drop_day_partitions_before(DAY0 + 3 * DAY_MS) == 3
    log = FakeLog(topic, 0)
    for _ in range(4):
        log.append(DAY0 + 2 * DAY_MS + 6, WORKER, Claimed(2001, "c2"))
    log.append(DAY0 + 7, WORKER, Succeeded(2001, "late"))
    projector = PartitionProjector(store, "h", topic, 0)
    assert projector.apply(log.records) == 1
    assert store.day_partitions() == [_day(0)]
    assert [r.type for r in store.job_events("h", 0, 2001)] == ["ok"]
