"""Unique jobs in the store (decision 0037): a keyed enqueue is decided by the fold
against the partition's jobs of its key, read with `keyed_jobs`, the same on Postgres,
MariaDB, a sharded store and the fake (the `store` fixture runs each test on each)."""

from __future__ import annotations

from pinledger.ledger.events import Actor, Claimed, Enqueued, Succeeded
from pinledger.ledger.log import queue_topic
from pinledger.ledger.state import JobState
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import PREFIX, store
from tests.contract.test_store_contract import FakeLog, _create_queues

__all__ = ["store"]  # the fixture, used by name

T0 = 1_700_000_000_000
WORKER = Actor("svc:worker", "r1", "s1")


def _keyed(key: str, body: bytes = b"x", unique_for_ms: int = 0) -> Enqueued:
    return Enqueued(body, 1, T0, 2, unique_key=key, unique_for_ms=unique_for_ms)


def _partition(store: LedgerStore) -> tuple[FakeLog, PartitionProjector]:
    _create_queues(store, ("once", 1))
    topic = queue_topic(PREFIX, "once")
    return FakeLog(topic, 0), PartitionProjector(store, "once", topic, 0)


def test_a_key_held_in_the_same_batch_and_in_an_earlier_one_turns_the_enqueue_away(
    store: LedgerStore,
) -> None:
    log, projector = _partition(store)
    # Record 0: "a" twice in one record (the second is turned away), and "b".
    log.append(T0, WORKER, _keyed("a", b"first"), _keyed("a", b"second"), _keyed("b"))
    projector.apply(log.records)
    # Record 1, another batch: "a" is held by the job of record 0, read from the store.
    log.append(T0 + 5, WORKER, _keyed("a", b"third"), Enqueued(b"plain", 1, T0, 2))
    projector.apply(log.records[1:])

    jobs = store.load_jobs("once", 0, range(0, 3 * 1000))
    keyed = {job.local_id: job for job in store.keyed_jobs("once", 0, ["a", "b", "c"])}
    assert sorted(keyed) == [0, 2]
    assert keyed[0].unique_key == "a" and keyed[0].body == b"first"
    assert keyed[2].unique_key == "b"
    assert len(jobs) == 3  # a, b and the job without a key
    turned = [row for local_id in (1, 1000) for row in store.timeline("once", 0, local_id)]
    assert [(r.type, r.applied, r.detail["held_by"]) for r in turned] == [
        ("enq", False, 0),
        ("enq", False, 0),
    ]
    assert "key 'a' is held by job 0 (PENDING)" in turned[0].verdict


def test_a_finished_holder_frees_its_key_unless_the_enqueue_asks_for_a_window(
    store: LedgerStore,
) -> None:
    log, projector = _partition(store)
    log.append(T0, WORKER, _keyed("a"))
    log.append(T0 + 10, WORKER, Claimed(0, "c1"))
    log.append(T0 + 20, WORKER, Succeeded(0, claim="c1"))
    # Within a 1 s window of the success: turned away; without a window: a new job.
    log.append(T0 + 500, WORKER, _keyed("a", unique_for_ms=1000))
    log.append(T0 + 600, WORKER, _keyed("a"))
    projector.apply(log.records)

    keyed = {job.local_id: job for job in store.keyed_jobs("once", 0, ["a"])}
    assert sorted(keyed) == [0, 4000]
    assert keyed[0].state is JobState.SUCCEEDED
    assert keyed[4000].state is JobState.PENDING
    (turned,) = store.timeline("once", 0, 3000)
    assert not turned.applied and turned.detail["held_by"] == 0
