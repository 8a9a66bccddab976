"""The projector against the real Kafka, on each SQL store (Postgres, MariaDB)."""

from __future__ import annotations

import pytest

from pinledger.ledger.commands import Limits, NewJob, decide_enqueue, decide_failure, decide_success
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Actor, Claimed
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.log import LogRecord, Position
from pinledger.ledger.state import JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.projector import PartitionProjector, ProjectionRunner
from pinledger.projections.store import (
    FencedError,
    LedgerStore,
    PartitionBatch,
    PartitionGoneError,
)
from tests.contract.store_fixtures import each_kind

WORKER = Actor(source="svc:worker1", request_id="req-1", server="s1")
OTHER = Actor(source="svc:worker2", request_id="req-2", server="s1")
T0 = 1_700_000_000_000


def _enqueue(
    writer: LedgerWriter, queue: str, partition: int, count: int, traceparent: str | None = None
) -> list[JobDescriptor]:
    jobs = [
        NewJob(body=f"body {i}".encode(), priority=1 + i % 3, attempts_allowed=2)
        for i in range(count)
    ]
    return writer.enqueue(
        queue, partition, decide_enqueue(jobs, T0, Limits()), T0, WORKER, traceparent
    )


def _project(store: LedgerStore, kafka: KafkaLog, prefix: str) -> int:
    runner = ProjectionRunner(store, kafka, prefix)
    try:
        return runner.catch_up()
    finally:
        runner.close()


def _state(store: LedgerStore, d: JobDescriptor) -> JobState | None:
    jobs = store.load_jobs(d.queue, d.partition, [d.local_id])
    return jobs[d.local_id].state if d.local_id in jobs else None


@each_kind
def test_jobs_flow_from_the_log_into_the_tables(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    writer.create_queue("mail", 2, T0, WORKER)
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    jobs = _enqueue(writer, "mail", 0, 5, tp) + _enqueue(writer, "mail", 1, 3)
    assert [str(d) for d in jobs[:2]] == ["mail:s0:p1:0", "mail:s0:p2:1"]
    a, b, c = jobs[0], jobs[1], jobs[2]
    writer.append("mail", 0, [Claimed(x.local_id, "claim-1") for x in (a, b, c)], T0 + 10, WORKER)
    writer.append(
        "mail",
        0,
        [decide_success(a.local_id, " done"), decide_failure(b.local_id, 1000, " oops")],
        T0 + 20,
        WORKER,
    )
    # A foreign worker's ack is recorded as rejected and changes nothing.
    writer.append("mail", 0, [decide_success(c.local_id, " mine?")], T0 + 30, OTHER)

    assert _project(store, kafka, prefix) == 8 + 3 + 2 + 1
    assert [q.name for q in store.queues()] == ["mail"]
    assert _state(store, a) is JobState.SUCCEEDED
    loaded_b = store.load_jobs("mail", 0, [b.local_id])[b.local_id]
    assert loaded_b.state is JobState.PENDING
    assert loaded_b.attempts_remaining == 1
    assert loaded_b.run_after == T0 + 20 + 1000
    assert loaded_b.custom_status == " oops"
    assert _state(store, c) is JobState.IN_PROGRESS

    timeline = store.timeline("mail", 0, c.local_id)
    assert [(row[2], row[8]) for row in timeline] == [
        ("enq", True),
        ("clm", True),
        ("ok", False),
    ]
    assert "claimed by 'svc:worker1'" in timeline[-1][9]
    assert timeline[0][13] == tp, "the enqueue's trace context is kept with the job"


@each_kind
def test_redelivered_records_are_not_applied_twice(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    writer.create_queue("q", 1, T0, WORKER)
    _enqueue(writer, "q", 0, 10)
    assert _project(store, kafka, prefix) == 10
    # A fresh projector starts from the committed offset: everything is a redelivery.
    projector = PartitionProjector(store, "q", writer.topic("q"), 0)
    assert projector.next_offset == 1
    reader = kafka.reader([Position(writer.topic("q"), 0, 0)])
    redelivered: list[LogRecord] = []
    for _ in range(50):
        redelivered += reader.poll(100, 200)
        if redelivered:
            break
    reader.close()
    assert [r.offset for r in redelivered] == [0]
    assert projector.apply(redelivered) == 0
    assert len(store.timeline("q", 0, 0)) == 1


@each_kind
def test_a_second_projector_of_one_partition_is_fenced(store: LedgerStore) -> None:
    store.start_offset("t", 0)
    batch = PartitionBatch(queue="q", topic="t", partition=0, expected_offset=0, next_offset=5)
    store.commit_partition_batch(batch)
    stale = PartitionBatch(queue="q", topic="t", partition=0, expected_offset=0, next_offset=3)
    with pytest.raises(FencedError):
        store.commit_partition_batch(stale)
    assert store.offset("t", 0) == 5


@each_kind
def test_deleting_a_queue_removes_its_rows(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    writer.create_queue("gone", 1, T0, WORKER)
    writer.create_queue("kept", 1, T0, WORKER)
    _enqueue(writer, "gone", 0, 4)
    kept = _enqueue(writer, "kept", 0, 2)
    _project(store, kafka, prefix)
    writer.delete_queue("gone", T0 + 1, WORKER)
    _project(store, kafka, prefix)
    assert [q.name for q in store.queues()] == ["kept"]
    assert store.partition_jobs("gone", 0) == {}
    assert _state(store, kept[0]) is JobState.PENDING


@each_kind
def test_records_of_a_deleted_queue_are_not_projected_after_its_deletion(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    """An owner may still hold records of a queue whose deletion the catalog projection
    has just applied: projecting them must not bring back its rows or an offset that a
    queue created again under the same name would start from."""
    writer.create_queue("again", 1, T0, WORKER)
    _project(store, kafka, prefix)
    owner_side = PartitionProjector(store, "again", writer.topic("again"), 0)
    _enqueue(writer, "again", 0, 3)
    reader = kafka.reader([Position(writer.topic("again"), 0, 0)])
    late: list[LogRecord] = []
    for _ in range(50):
        late += reader.poll(100, 200)
        if late:
            break
    reader.close()
    writer.delete_queue("again", T0 + 1, WORKER)
    _project(store, kafka, prefix)  # the catalog projection drops the queue's rows

    with pytest.raises(PartitionGoneError, match="was deleted"):
        owner_side.apply(late)
    assert store.partition_jobs("again", 0) == {}
    assert store.offsets([(writer.topic("again"), 0)]) == {}

    # Created again, the queue projects its new topic from its first record.
    writer.create_queue("again", 1, T0 + 2, WORKER)
    (fresh,) = _enqueue(writer, "again", 0, 1)
    _project(store, kafka, prefix)
    assert _state(store, fresh) is JobState.PENDING
    assert list(store.partition_jobs("again", 0)) == [fresh.local_id]


@each_kind
def test_a_fenced_projector_is_told_where_the_offset_went(store: LedgerStore) -> None:
    store.start_offset("t", 0)
    store.commit_partition_batch(
        PartitionBatch(queue="q", topic="t", partition=0, expected_offset=0, next_offset=5)
    )
    stale = PartitionBatch(queue="q", topic="t", partition=0, expected_offset=0, next_offset=3)
    with pytest.raises(FencedError, match="advanced it to 5") as raised:
        store.commit_partition_batch(stale)
    assert not isinstance(raised.value, PartitionGoneError)
