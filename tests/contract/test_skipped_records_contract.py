"""Skipped records in the Store contract (decision 0032): the catalog's RecordSkipped
projected as the catalog's fold says, a skipped record passed over by every projector,
and a refusal to commit a record told apart from a store that does not answer. On
Postgres, MariaDB, a sharded store and the FakeStore alike."""

from __future__ import annotations

import secrets

import pytest

from pinledger.ledger import codec, formats
from pinledger.ledger.events import (
    Actor,
    Enqueued,
    Envelope,
    Event,
    QueueCreated,
    QueueDeleted,
    QueueResized,
    RecordSkipped,
)
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, LogRecord, catalog_topic, queue_topic
from pinledger.ledger.state import Job, JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import (
    CatalogProjector,
    PartitionProjector,
    ProjectionRunner,
    Scope,
)
from pinledger.projections.replay import replay
from pinledger.projections.skips import REASON_CHARS, skips_of
from pinledger.projections.store import (
    ImportedJob,
    LedgerStore,
    PartitionBatch,
    StoreError,
    StoreUnavailableError,
    TableDiff,
)
from pinledger.projections.verify import verify
from tests.contract.store_fixtures import ON_POSTGRES, PREFIX, scratch, store

__all__ = ["scratch", "store"]  # the fixtures, used by name

T0 = 1_700_000_000_000
OPERATOR = Actor("pinledger:skip-record by ops@host", "", "host")


def _catalog(*records: tuple[Event, ...]) -> list[LogRecord]:
    topic = catalog_topic(PREFIX)
    return [
        LogRecord(topic, 0, offset, codec.encode(Envelope(T0 + offset, OPERATOR, events)), [])
        for offset, events in enumerate(records)
    ]


SKIPS: list[tuple[Event, ...]] = [
    (QueueCreated("mail", 2), QueueCreated("old", 1)),
    (RecordSkipped("mail", 1, 42, "a NUL in its custom status"),),
    (RecordSkipped("mail", 1, 42, "a second skip: the first stands"),),
    (RecordSkipped("mail", 0, 7, "x" * (REASON_CHARS + 50) + "\x00"),),
    (RecordSkipped("mail", 2, 1, "no such partition"),),
    (RecordSkipped("mail", 0, -1, "no such offset"),),
    (RecordSkipped("nowhere", 0, 3, "no such queue"),),
    (RecordSkipped("old", 0, 3, "goes with its queue"),),
    (QueueDeleted("old"), QueueCreated("old", 1)),
    # A skip in a record with the queue's growth: it holds for the queue as it is then.
    (QueueResized("mail", 4, "grown"),),
    (RecordSkipped("mail", 3, 5, "a new partition"),),
]


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_skipped_records_project_as_the_catalog_folds_them(
    store: LedgerStore, one_at_a_time: bool
) -> None:
    records = _catalog(*SKIPS)
    folded = skips_of(codec.decode(r.value) for r in records)
    catalog = CatalogProjector(store, PREFIX)
    if one_at_a_time:
        for record in records:
            catalog.apply([record])
    else:
        catalog.apply(records)
    found = {
        (queue, partition): store.skipped_records(queue, partition)
        for queue, partition in [("mail", p) for p in range(4)] + [("old", 0), ("nowhere", 0)]
    }
    assert {key: offsets for key, offsets in found.items() if offsets} == folded
    assert store.skipped_records("mail", 1) == {42: "a NUL in its custom status"}
    # Bounded, and without the NUL Postgres refuses in text (the catalog must commit).
    assert store.skipped_records("mail", 0) == {7: "x" * REASON_CHARS}
    assert store.skipped_records("mail", 3) == {5: "a new partition"}
    assert store.skipped_records("old", 0) == {}
    # Each committed skip is told once to whoever follows them (an owner).
    assert [s.offset for s in catalog.take_skipped()] == [42, 42, 7, 1, -1, 3, 3, 5]
    assert catalog.take_skipped() == []


def test_a_deleted_queue_takes_its_skipped_records_with_it(store: LedgerStore) -> None:
    catalog = CatalogProjector(store, PREFIX)
    catalog.apply(_catalog((QueueCreated("mail", 1),), (RecordSkipped("mail", 0, 2, "x"),)))
    assert store.skipped_records("mail", 0) == {2: "x"}
    deletion = _catalog((QueueDeleted("mail"),), (QueueCreated("mail", 1),))
    catalog.apply([LogRecord(r.topic, 0, r.offset + 2, r.value, []) for r in deletion])
    assert store.skipped_records("mail", 0) == {}
    assert store.diff(
        other_schema=store.schema,
        table="skipped_records",
        queue_column="queue",
        partition_column="partition",
        queues=["mail"],
        partition=None,
        limit=5,
    ) == TableDiff(0, 0, [], [])


def _queue_records(topic: str, *values: bytes) -> list[LogRecord]:
    return [LogRecord(topic, 0, offset, value, []) for offset, value in enumerate(values)]


def _enqueue(body: bytes, status: str = "") -> bytes:
    return codec.encode(Envelope(T0, OPERATOR, (Enqueued(body, 1, T0, 1, status),)))


def test_a_skipped_record_is_passed_over_and_its_partition_goes_on(store: LedgerStore) -> None:
    """No job, no timeline row, no decoding of the record: the offset moves past it."""
    CatalogProjector(store, PREFIX).apply(
        _catalog((QueueCreated("mail", 1),), (RecordSkipped("mail", 0, 1, "garbage"),))
    )
    topic = queue_topic(PREFIX, "mail")
    records = _queue_records(topic, _enqueue(b"before"), b"not a record", _enqueue(b"after"))
    projector = PartitionProjector(store, "mail", topic, 0)
    assert projector.skips == {1: "garbage"}
    assert projector.apply(records) == 2
    assert store.offsets([(topic, 0)]) == {(topic, 0): 3}
    jobs = store.partition_jobs("mail", 0)
    assert sorted(jobs) == [0, 2000]
    assert {job.body for job in jobs.values()} == {b"before", b"after"}
    assert store.job_events("mail", 0, 1000) == []
    # A batch of nothing but a skipped record moves the offset too.
    again = PartitionProjector(store, "mail", topic, 0, skips={3: "garbage"})
    assert again.apply([LogRecord(topic, 0, 3, b"\xff", [])]) == 0
    assert store.offsets([(topic, 0)]) == {(topic, 0): 4}


def _refused_batch(kind: str) -> tuple[PartitionBatch, str]:
    """A batch the store of `kind` refuses, and what it holds that the store refuses."""
    job = Job(
        local_id=0,
        priority=1,
        state=JobState.PENDING,
        body=b"x",
        attempts_allowed=1,
        attempts_remaining=1,
        custom_status="a\x00b",
        created_at=T0,
        run_after=T0,
        updated_at=T0,
    )
    if kind == "mysql":
        # MariaDB keeps a NUL; it refuses a queue name longer than its column instead.
        name = "q" * 300
        return PartitionBatch(name, "t", 0, 0, 1, upserts=[job._replace(custom_status="")]), name
    return PartitionBatch("q", "t", 0, 0, 1, upserts=[job]), "\x00"


def test_a_row_the_store_cannot_hold_is_a_refusal_not_an_unavailable_store(
    store: LedgerStore, store_kind: str
) -> None:
    """What a store refuses fails again the same way (a NUL in Postgres text, a value
    too long for a MariaDB column): a plain StoreError, never StoreUnavailableError,
    which an owner would retry for the whole server (decision 0032)."""
    if isinstance(store, FakeStore):
        store.refuse_text_containing("\x00")  # as Postgres
    store.start_offset("t", 0)
    batch, _ = _refused_batch(store_kind)
    with pytest.raises(StoreError) as refused:
        store.commit_partition_batch(batch)
    assert not isinstance(refused.value, StoreUnavailableError)
    assert store.offset("t", 0) == 0


def test_a_replay_of_a_log_with_a_skipped_record_is_identical_to_the_live_tables(
    store: LedgerStore, scratch: LedgerStore
) -> None:
    """The live projection passes over the record once the skip is projected; a replay
    into a scratch schema reads the skips first (its partition reaches the record before
    its catalog reaches the skip); the verify's fold passes over it too."""
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("q", 1, T0, OPERATOR)
    writer.append("q", 0, [Enqueued(b"before", 1, T0, 1)], T0, OPERATOR)
    [bad] = log.append([Append(queue_topic(PREFIX, "q"), 0, b"\x00garbage")])
    writer.append("q", 0, [Enqueued(b"after", 1, T0, 1)], T0, OPERATOR)
    writer.follow_format(formats.LATEST)
    writer.skip_record(RecordSkipped("q", 0, bad, "garbage"), T0, OPERATOR)
    live = ProjectionRunner(store, log, PREFIX, max_records=2)
    try:
        assert live.catch_up() == 2
    finally:
        live.close()
    if isinstance(store, FakeStore):  # a replay diffs two schemas of one database
        scratch = FakeStore("scratch", store.database)
    report = replay(store, scratch, log, PREFIX, Scope())
    assert report.identical, report.diffs
    assert verify(store, log, PREFIX, Scope()).identical
    assert scratch.skipped_records("q", 0) == {bad: "garbage"}


def test_a_value_too_large_for_an_index_is_a_refusal_where_it_is_refused(
    store: LedgerStore, store_kind: str
) -> None:
    """An imported job's PinLater descriptor too long for the index over it: Postgres
    refuses the row (SQLSTATE 54, "program limit exceeded", which psycopg calls an
    operational error) as it would every time: a refusal, never an unavailable store
    (one record would otherwise stall every partition of a server). MariaDB and the
    FakeStore keep it."""
    store.start_offset("t", 0)
    job = _refused_batch(store_kind)[0].upserts[0]._replace(custom_status="")
    descriptor = secrets.token_hex(5000)  # 10,000 characters that hardly compress
    batch = PartitionBatch(
        "q", "t", 0, 0, 1, upserts=[job], imported={0: ImportedJob(descriptor, 1)}
    )
    if store_kind not in ON_POSTGRES:
        store.commit_partition_batch(batch)
        return
    with pytest.raises(StoreError, match="index row requires") as refused:
        store.commit_partition_batch(batch)
    assert not isinstance(refused.value, StoreUnavailableError)
    assert store.offset("t", 0) == 0
