"""The Store contract (projections/store.py): the same tests on the Postgres and MariaDB
adapters, on a sharded store over two Postgres schemas and on the in-memory FakeStore
(the `store` fixture runs each test on each, tests/contract/store_fixtures.py)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from pinledger.ledger import codec
from pinledger.ledger.events import (
    Actor,
    Claimed,
    Enqueued,
    Envelope,
    Event,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueueResized,
    Succeeded,
)
from pinledger.ledger.log import LogRecord, catalog_topic, queue_topic
from pinledger.ledger.state import Job, JobState
from pinledger.projections.actions import EVENT_TYPES
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import CatalogProjector, PartitionProjector
from pinledger.projections.store import (
    READY_START,
    UNFINISHED,
    DueJob,
    EventBucket,
    EventRow,
    FencedError,
    InvalidRegexError,
    JobCount,
    JobFilter,
    JobRow,
    JobSearch,
    LedgerStore,
    PartitionBatch,
    PartitionGoneError,
    QueueRow,
    QueueTally,
    ScanKey,
    StateCount,
    StoreError,
    StoreUnavailableError,
    TableDiff,
    TimelineRow,
)
from tests.contract.store_fixtures import PREFIX, SHARDS, dialect, place, store

__all__ = ["store"]  # the fixture, used by name

T0 = 1_700_000_000_000
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
WORKER = Actor("svc:worker", "r1", "s1")
OTHER = Actor("svc:other", "r2", "s1")
PENDING, IN_PROGRESS, SUCCEEDED = JobState.PENDING, JobState.IN_PROGRESS, JobState.SUCCEEDED


class FakeLog:
    """Records of one partition, encoded as the writer encodes them."""

    def __init__(self, topic: str, partition: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[LogRecord] = []

    def append(
        self, at: int, actor: Actor, *events: Event, traceparent: str | None = None
    ) -> LogRecord:
        value = codec.encode(Envelope(at, actor, events))
        record = LogRecord(
            self.topic, self.partition, len(self.records), value, codec.trace_headers(traceparent)
        )
        self.records.append(record)
        return record


def _create_queues(store: LedgerStore, *queues: tuple[str, int]) -> CatalogProjector:
    """The queues created, as a writer creates them: with their partitions' placements
    (on a sharded store, spread over its shards)."""
    catalog = CatalogProjector(store, PREFIX)
    log = FakeLog(catalog_topic(PREFIX))
    for name, partitions in queues:
        log.append(T0, WORKER, QueueCreated(name, partitions), *place(store, name, partitions))
    assert catalog.apply(log.records)
    return catalog


def _enqueued(body: bytes, priority: int, run_after: int) -> Enqueued:
    return Enqueued(body=body, priority=priority, run_after=run_after, attempts_allowed=2)


def _mail(store: LedgerStore) -> str:
    """Queue "mail", 2 partitions. Partition 0: jobs 0-3, job 0 claimed and acked, a
    foreign ack of job 3 rejected. Partition 1: jobs 0 and 1. Returns the topic."""
    _create_queues(store, ("mail", 2))
    topic = queue_topic(PREFIX, "mail")
    p0, p1 = FakeLog(topic, 0), FakeLog(topic, 1)
    p0.append(
        T0,
        WORKER,
        _enqueued(b"alpha", 1, T0),
        _enqueued(b"beta", 2, T0),
        _enqueued(b"gamma\x00\xff", 1, T0 + 60_000),
        _enqueued(b"delta", 1, T0 - 10),
        traceparent=TP,
    )
    p0.append(T0 + 10, WORKER, Claimed(0, "c1"))
    p0.append(T0 + 20, WORKER, Succeeded(0, " done"), Succeeded(3, " not mine"))
    p1.append(T0, WORKER, _enqueued(b"alpha2", 1, T0), _enqueued(b"epsilon", 3, T0))
    assert PartitionProjector(store, "mail", topic, 0).apply(p0.records) == 7
    assert PartitionProjector(store, "mail", topic, 1).apply(p1.records) == 2
    return topic


def test_migrating_again_applies_nothing(store: LedgerStore) -> None:
    assert store.migrate() == []
    assert store.migrate() == []
    assert store.queues() == []


def test_an_ended_session_is_refused_until_it_expires_then_forgotten(store: LedgerStore) -> None:
    assert not store.session_ended("a" * 64)
    store.end_session("a" * 64, until_ms=T0 + 1000, now=T0)
    store.end_session("a" * 64, until_ms=T0 + 1000, now=T0)  # a second logout: no error
    store.end_session("b" * 64, until_ms=T0 + 5000, now=T0)
    assert store.session_ended("a" * 64) and store.session_ended("b" * 64)
    # A logout after the first expired forgets it; the other stays ended.
    store.end_session("c" * 64, until_ms=T0 + 9000, now=T0 + 1000)
    assert not store.session_ended("a" * 64)
    assert store.session_ended("b" * 64) and store.session_ended("c" * 64)


def test_a_projected_batch_reads_back_by_lookup(store: LedgerStore) -> None:
    _mail(store)
    assert [(q.name, q.partitions, q.created_at) for q in store.queues()] == [("mail", 2, T0)]
    keys = [(0, 0), (0, 1), (1, 0), (0, 99)]
    found = sorted(
        store.lookup("mail", keys, include_body=True), key=lambda r: (r.partition, r.job.local_id)
    )
    assert [(r.partition, r.job.local_id, r.job.state, r.job.body) for r in found] == [
        (0, 0, SUCCEEDED, b"alpha"),
        (0, 1, PENDING, b"beta"),
        (1, 0, PENDING, b"alpha2"),
    ]
    assert found[0].job.custom_status == " done"
    assert found[0].job.updated_at == T0 + 20
    assert found[1].job.attempts_remaining == 2
    assert all(r.job.claim_source is None and r.job.touched_at is None for r in found)
    bodiless = store.lookup("mail", keys, include_body=False)
    assert sorted(r.job.body for r in bodiless) == [b"", b"", b""]
    assert store.lookup("mail", [], include_body=True) == []
    assert store.lookup("other", keys, include_body=True) == []


def test_counts_by_state_priority_time_and_body(store: LedgerStore) -> None:
    _mail(store)
    now = T0 + 30
    assert store.count(JobFilter("mail", PENDING), now, future=False) == 4
    assert store.count(JobFilter("mail", PENDING), now, future=True) == 1
    assert store.count(JobFilter("mail", PENDING, priority=1), now, future=False) == 2
    assert store.count(JobFilter("mail", SUCCEEDED), now, future=False) == 1
    assert store.count(JobFilter("mail", IN_PROGRESS), now, future=False) == 0
    assert store.count(JobFilter("mail", PENDING, regex="^alpha"), now, future=False) == 1
    # Bodies match as each store's regexes read them: Postgres's on the escape encoding
    # (NUL and high bytes octal), MariaDB's PCRE2 on the bytes (\x00, \xff).
    pattern = r"^gamma\\000\\377$" if dialect(store) == "postgres" else r"^gamma\x00\xff$"
    escaped = JobFilter("mail", PENDING, regex=pattern)
    assert store.count(escaped, now, future=True) == 1
    assert store.count(JobFilter("other", PENDING), now, future=False) == 0


def test_a_scan_pages_newest_first_without_repeats(store: LedgerStore) -> None:
    _mail(store)
    where, now = JobFilter("mail", PENDING), T0 + 30

    def page(after: ScanKey | None) -> list[tuple[int, int, int]]:
        rows = store.scan(where, now, False, after, 2)
        assert all(r.job.body == b"" and r.job.claim_source is None for r in rows)
        return [(r.job.run_after, r.partition, r.job.local_id) for r in rows]

    first = page(None)
    assert first == [(T0, 1, 1), (T0, 1, 0)]
    second = page(ScanKey(*first[-1]))
    assert second == [(T0, 0, 1), (T0 - 10, 0, 3)]
    assert page(ScanKey(*second[-1])) == []
    future = store.scan(where, now, True, None, 10)
    assert [(r.partition, r.job.local_id) for r in future] == [(0, 2)]


def test_a_bulk_selection_is_oldest_first_without_bodies(store: LedgerStore) -> None:
    _mail(store)
    rows = store.select(JobFilter("mail", PENDING, priority=1), 10)
    assert [(r.partition, r.job.local_id) for r in rows] == [(0, 3), (1, 0), (0, 2)]
    assert {r.job.body for r in rows} == {b""}
    assert len(store.select(JobFilter("mail", PENDING, priority=1), 1)) == 1
    matching = store.select(JobFilter("mail", PENDING, priority=1, regex="lta$"), 10)
    assert [(r.partition, r.job.local_id) for r in matching] == [(0, 3)]


def test_the_timeline_keeps_every_event_with_its_codec_tag(store: LedgerStore) -> None:
    _mail(store)
    done = store.job_events("mail", 0, 0)
    assert [(r.type, r.applied, r.state_after, r.at) for r in done] == [
        ("enq", True, int(PENDING), T0),
        ("clm", True, int(IN_PROGRESS), T0 + 10),
        ("ok", True, int(SUCCEEDED), T0 + 20),
    ]
    assert [(r.offset, r.idx) for r in done] == [(0, 0), (1, 0), (2, 0)]
    assert done[0].traceparent == TP and done[1].traceparent is None
    assert done[1].claim == "c1" and done[0].claim is None
    assert done[0].detail["body_bytes"] == 5
    assert (done[2].source, done[2].request_id, done[2].server) == ("svc:worker", "r1", "s1")
    rejected = store.job_events("mail", 0, 3)
    assert [(r.type, r.applied, r.idx) for r in rejected] == [("enq", True, 3), ("ok", False, 1)]
    assert rejected[1].verdict.startswith("rejected: ")
    timeline = store.timeline("mail", 0, 0)
    assert all(isinstance(row, TimelineRow) for row in timeline)
    assert timeline == [TimelineRow(*r[1:]) for r in done]
    assert store.job_events("mail", 0, 99) == []
    assert store.last_event_time("mail") == T0 + 20
    assert store.last_event_time("other") is None


def test_summaries_and_the_queue_as_of_a_moment(store: LedgerStore) -> None:
    _mail(store)
    assert store.job_counts() == [
        JobCount("mail", PENDING, 1, 3),
        JobCount("mail", PENDING, 2, 1),
        JobCount("mail", PENDING, 3, 1),
        JobCount("mail", SUCCEEDED, 1, 1),
    ]
    assert store.counts_as_of("mail", T0 + 30) == [
        StateCount(PENDING, 1, False, 2),
        StateCount(PENDING, 1, True, 1),
        StateCount(PENDING, 2, False, 1),
        StateCount(PENDING, 3, False, 1),
        StateCount(SUCCEEDED, 1, False, 1),
    ]
    assert store.due_in_dequeue_order("mail", T0 + 30, 10) == [
        DueJob(0, 3, 1, T0 - 10),
        DueJob(1, 0, 1, T0),
        DueJob(0, 1, 2, T0),
        DueJob(1, 1, 3, T0),
    ]
    assert store.due_in_dequeue_order("mail", T0 + 30, 1) == [DueJob(0, 3, 1, T0 - 10)]


def test_a_ready_window_refills_in_dequeue_order_after_a_key(store: LedgerStore) -> None:
    _mail(store)
    first = store.ready_jobs("mail", 0, 1, READY_START, 10)
    assert [(h.job.local_id, h.job.run_after, h.traceparent) for h in first] == [
        (3, T0 - 10, TP),
        (2, T0 + 60_000, TP),
    ]
    assert first[1].job.body == b"gamma\x00\xff"
    assert [h.job.local_id for h in store.ready_jobs("mail", 0, 1, READY_START, 1)] == [3]
    after = (T0 - 10, 3)
    assert [h.job.local_id for h in store.ready_jobs("mail", 0, 1, after, 10)] == [2]
    assert store.ready_jobs("mail", 0, 1, (T0 + 60_000, 2), 10) == []
    assert [h.job.local_id for h in store.ready_jobs("mail", 0, 2, READY_START, 10)] == [1]
    [other] = store.ready_jobs("mail", 1, 1, READY_START, 10)
    assert (other.job.local_id, other.job.body, other.traceparent) == (0, b"alpha2", None)
    assert store.ready_jobs("other", 0, 1, READY_START, 10) == []


def test_expired_claims_are_the_in_progress_jobs_touched_before_a_time(
    store: LedgerStore,
) -> None:
    topic = _mail(store)
    log = FakeLog(topic, 1)
    log.append(T0, WORKER, _enqueued(b"alpha2", 1, T0), _enqueued(b"epsilon", 3, T0))
    log.append(T0 + 5, WORKER, Claimed(1, "c2"))
    log.append(T0 + 7, WORKER, Claimed(0, "c3"))
    projector = PartitionProjector(store, "mail", topic, 1)
    assert projector.apply(log.records) == 2  # the first record was projected already
    found = store.expired_claims("mail", 1, T0 + 7, 10)
    assert [(h.job.local_id, h.job.claim, h.job.touched_at, h.job.body) for h in found] == [
        (1, "c2", T0 + 5, b""),
        (0, "c3", T0 + 7, b""),
    ]
    assert [h.job.local_id for h in store.expired_claims("mail", 1, T0 + 6, 10)] == [1]
    assert [h.job.local_id for h in store.expired_claims("mail", 1, T0 + 7, 1)] == [1]
    assert store.expired_claims("mail", 1, T0 + 4, 10) == []
    assert store.expired_claims("mail", 0, T0 + 100, 10) == []  # job 0 there was acked


def test_an_owner_loads_the_unfinished_jobs_of_its_partition(store: LedgerStore) -> None:
    topic = _mail(store)
    unfinished = store.partition_jobs("mail", 0, UNFINISHED)
    assert sorted(unfinished) == [1, 2, 3]
    assert unfinished[2].body == b"gamma\x00\xff"
    assert sorted(store.partition_jobs("mail", 0)) == [0, 1, 2, 3]
    assert store.partition_traceparents("mail", 0, UNFINISHED) == {1: TP, 2: TP, 3: TP}
    assert store.partition_traceparents("mail", 1, UNFINISHED) == {}
    loaded = store.load_jobs("mail", 0, [0, 3, 42])
    assert sorted(loaded) == [0, 3] and loaded[0].body == b"alpha"
    assert store.load_jobs("mail", 0, []) == {}
    assert store.offsets([(topic, 0), (topic, 1), ("nope", 0)]) == {(topic, 0): 3, (topic, 1): 1}
    assert store.offset(topic, 0) == 3


def test_finished_jobs_expire_at_their_cut_off(store: LedgerStore) -> None:
    _mail(store)
    expired = store.expired("mail", 0, succeeded_before=T0 + 20, failed_before=T0, limit=10)
    assert [(j.local_id, j.state, j.body) for j in expired] == [(0, SUCCEEDED, b"")]
    assert store.expired("mail", 0, T0 + 19, T0 + 10**6, 10) == []
    assert store.expired("mail", 1, T0 + 10**6, T0 + 10**6, 10) == []


def test_offsets_move_only_forward_and_a_stale_commit_is_fenced(store: LedgerStore) -> None:
    assert store.start_offset("t", 0) == 0
    assert store.offsets([("t", 0), ("t", 1)]) == {("t", 0): 0}
    store.commit_partition_batch(PartitionBatch("q", "t", 0, expected_offset=0, next_offset=5))
    stale = PartitionBatch("q", "t", 0, expected_offset=0, next_offset=3, upserts=[_job(7)])
    with pytest.raises(FencedError, match="advanced it to 5") as raised:
        store.commit_partition_batch(stale)
    assert not isinstance(raised.value, PartitionGoneError)
    assert store.offset("t", 0) == 5
    assert store.load_jobs("q", 0, [7]) == {}, "a fenced batch applies nothing"
    with pytest.raises(StoreError, match="forward"):
        store.commit_partition_batch(PartitionBatch("q", "t", 0, 5, 4))
    with pytest.raises(StoreError, match="forward"):
        store.commit_partition_batch(PartitionBatch("q", "t", 0, 5, 5))
    store.commit_partition_batch(PartitionBatch("q", "t", 0, 5, 6, upserts=[_job(7)]))
    assert store.offset("t", 0) == 6
    assert store.load_jobs("q", 0, [7])[7].body == b"x"


def test_a_store_answers_where_its_partitions_are(store: LedgerStore, store_kind: str) -> None:
    """The placement questions callers ask of any store (projections/store.py
    `StoreShards`), never of its type: a store that is one database is its own one shard,
    named "", holding every partition, and moves nothing; a sharded store names its
    shards, home first, and the shard each partition's rows are read from."""
    topic = _mail(store)
    shards = store.shards()
    sharded = store_kind == "sharded"
    assert list(shards) == (list(SHARDS) if sharded else [""])
    assert store.supports_moves() is sharded
    if not sharded:
        assert shards[""] is store
    for partition in (0, 1):
        name, held = store.placed_store("mail", partition)
        assert name == store.shard_name("mail", partition)
        assert held is shards[name]
        assert held.partition_jobs("mail", partition) == store.partition_jobs("mail", partition)
        assert held.offset(topic, partition) == store.offset(topic, partition)
    if sharded:  # _mail places partition 0 off home
        assert store.shard_name("mail", 0) != next(iter(shards))
    store.forget_placements()
    assert store.open_listed(list(shards)) == []
    assert store.partition_jobs("mail", 1).keys() == {0, 1}


def test_a_stale_catalog_commit_is_fenced(store: LedgerStore) -> None:
    catalog = _create_queues(store, ("a", 1))
    assert catalog.next_offset == 1
    with pytest.raises(FencedError, match="no longer at offset 0"):
        store.commit_catalog(catalog.topic, 0, 1, [], [])
    assert [q.name for q in store.queues()] == ["a"]


def test_deleting_a_queue_removes_its_rows_and_fences_its_partitions(store: LedgerStore) -> None:
    catalog = _create_queues(store, ("gone", 1), ("kept", 1))
    gone_topic, kept_topic = queue_topic(PREFIX, "gone"), queue_topic(PREFIX, "kept")
    gone, kept = FakeLog(gone_topic), FakeLog(kept_topic)
    gone.append(T0, WORKER, _enqueued(b"a", 1, T0))
    kept.append(T0, WORKER, _enqueued(b"b", 1, T0))
    late_projector = PartitionProjector(store, "gone", gone_topic, 0)
    late_projector.apply(gone.records)
    PartitionProjector(store, "kept", kept_topic, 0).apply(kept.records)
    late = gone.append(T0 + 1, WORKER, _enqueued(b"late", 1, T0))

    envelope = Envelope(T0 + 1, WORKER, (QueueDeleted("gone"),))
    deletion = LogRecord(catalog.topic, 0, catalog.next_offset, codec.encode(envelope), [])
    assert catalog.apply([deletion])
    assert [q.name for q in store.queues()] == ["kept"]
    assert store.partition_jobs("gone", 0) == {}
    assert store.job_events("gone", 0, 0) == []
    assert store.offsets([(gone_topic, 0)]) == {}
    with pytest.raises(PartitionGoneError, match="was deleted"):
        late_projector.apply([late])
    assert store.partition_jobs("gone", 0) == {}
    assert list(store.partition_jobs("kept", 0)) == [0]
    assert store.offsets([(kept_topic, 0)]) == {(kept_topic, 0): 1}


def test_an_offset_is_read_never_made_by_a_projector(store: LedgerStore) -> None:
    """Only the catalog's projection (a queue created or grown) and a move's target
    (`start_offset`) record a partition's offset: a projector of a partition the store
    holds no offset for is refused, and leaves none behind (decision 0032)."""
    topic = queue_topic(PREFIX, "nowhere")
    with pytest.raises(PartitionGoneError, match=r"nowhere\[0\] has no offset"):
        PartitionProjector(store, "nowhere", topic, 0)
    assert store.offsets([(topic, 0)]) == {}
    assert store.start_offset(topic, 0) == 0
    assert store.offsets([(topic, 0)]) == {(topic, 0): 0}


def test_a_queue_created_again_under_its_name_starts_empty_from_offset_0(
    store: LedgerStore,
) -> None:
    """A projector of the deleted queue's topic that started after the deletion (an
    offset made up by an older release) left rows and an offset behind: the creation of
    a queue under the name removes them, and its partitions start at 0 of the new topic.
    A resize of the deleted queue records no offset."""
    catalog = _create_queues(store, ("mail", 1))
    topic = queue_topic(PREFIX, "mail")
    log = FakeLog(topic)
    log.append(T0, WORKER, _enqueued(b"old", 1, T0))

    def catalog_record(*events: Event) -> LogRecord:
        value = codec.encode(Envelope(T0 + 1, WORKER, events))
        return LogRecord(catalog.topic, 0, catalog.next_offset, value, [])

    assert catalog.apply([catalog_record(QueueDeleted("mail"))])
    catalog.apply([catalog_record(QueueResized("mail", 3, "late"))])
    assert store.offsets([(topic, p) for p in range(3)]) == {}
    store.start_offset(topic, 0)  # what an older release's owner did on adoption
    PartitionProjector(store, "mail", topic, 0).apply(log.records)
    assert list(store.partition_jobs("mail", 0)) == [0]

    assert catalog.apply([catalog_record(QueueCreated("mail", 2))])
    assert store.partition_jobs("mail", 0) == {}
    assert store.job_events("mail", 0, 0) == []
    assert store.offsets([(topic, 0), (topic, 1)]) == {(topic, 0): 0, (topic, 1): 0}
    assert [(q.name, q.partitions) for q in store.queues()] == [("mail", 2)]


def test_a_schema_compared_with_itself_has_no_differences(store: LedgerStore) -> None:
    _mail(store)
    for table, queue_column, partition_column in (
        ("queues", "name", "partitions"),
        ("jobs", "queue", "partition"),
        ("job_events", "queue", "partition"),
        ("imported_descriptors", "queue", "partition"),
    ):
        assert store.diff(
            other_schema=store.schema,
            table=table,
            queue_column=queue_column,
            partition_column=partition_column,
            queues=["mail"],
            partition=None,
            limit=5,
        ) == TableDiff(0, 0, [], [])


def test_imported_jobs_are_found_by_their_pinlater_descriptors(store: LedgerStore) -> None:
    catalog = _create_queues(store, ("moved", 2))
    topic = queue_topic(PREFIX, "moved")
    log = FakeLog(topic, 1)
    log.append(T0, WORKER)  # an empty record: the importer's room
    log.append(
        T0,
        WORKER,
        dataclasses.replace(_enqueued(b"a", 2, T0), imported_from="moved:s1:p2:7"),
        _enqueued(b"native", 1, T0),
        dataclasses.replace(_enqueued(b"b", 3, T0), imported_from="moved:sx:p3:8"),
    )
    # A page appended twice (an importer crash): the first copy stays.
    log.append(
        T0, WORKER, dataclasses.replace(_enqueued(b"a", 2, T0), imported_from="moved:s1:p2:7")
    )
    assert PartitionProjector(store, "moved", topic, 1).apply(log.records) == 4
    asked = ["moved:s1:p2:7", "moved:sx:p3:8", "moved:s1:p1:1001", "moved:s0:p1:9"]
    assert {old: str(new) for old, new in store.imported("moved", asked).items()} == {
        "moved:s1:p2:7": "moved:s1:p2:1000",
        "moved:sx:p3:8": "moved:s1:p3:1002",
    }
    assert store.imported("other", asked) == {}
    assert store.imported("moved", []) == {}

    envelope = Envelope(T0 + 1, WORKER, (QueueDeleted("moved"),))
    deletion = LogRecord(catalog.topic, 0, catalog.next_offset, codec.encode(envelope), [])
    assert catalog.apply([deletion])
    assert store.imported("moved", asked) == {}


# -- errors -----------------------------------------------------------------------------


def _job(local_id: int, **changes: object) -> Job:
    job = Job(local_id, 1, PENDING, b"x", 2, 2, "", T0, T0, T0)
    return job._replace(**changes)  # type: ignore[arg-type]


def test_a_bad_body_regex_is_an_invalid_regex_error(store: LedgerStore) -> None:
    store.check_regex(None)
    store.check_regex("^a.*b$")
    where = JobFilter("mail", PENDING, priority=1, regex="(")
    with pytest.raises(InvalidRegexError, match="regex"):
        store.check_regex("(")
    with pytest.raises(InvalidRegexError):
        store.count(where, T0, False)
    with pytest.raises(InvalidRegexError):
        store.scan(where, T0, False, None, 10)


def test_a_row_the_schema_refuses_is_a_store_error_and_applies_nothing(store: LedgerStore) -> None:
    store.start_offset("t", 0)
    broken = _job(1, state=IN_PROGRESS)  # IN_PROGRESS without a claim
    with pytest.raises(StoreError):
        store.commit_partition_batch(PartitionBatch("q", "t", 0, 0, 1, upserts=[_job(0), broken]))
    assert store.offset("t", 0) == 0
    assert store.load_jobs("q", 0, [0, 1]) == {}


def _event_row(local_id: int, offset: int, tag: str, **changes: Any) -> EventRow:
    row = EventRow(
        local_id, offset, 0, tag, T0, "", "", "", None, True, "applied", None, None, {}, None
    )
    return row._replace(**changes)


def _claimed_job(local_id: int, source: str) -> Job:
    return _job(local_id, state=IN_PROGRESS, claim="c1", claim_source=source, touched_at=T0)


# Text no store can hold: the Thrift edge refuses it (ledger/limits.py), so none reaches
# a store; here is what each store does if some did. Postgres refuses NUL in text and
# jsonb; MariaDB keeps it, but its TEXT holds 65,535 bytes; neither driver can encode an
# unpaired surrogate. The fake refuses what either refuses. A refusal is a StoreError
# that is not StoreUnavailableError: the same batch fails again the same way.
TEXT_CASES = [
    ("NUL in a custom status", {"upserts": [_job(0, custom_status="done\x00")]}, "postgres"),
    ("NUL in a claim source", {"upserts": [_claimed_job(0, "w\x00")]}, "postgres"),
    ("NUL in an event's source", {"events": [_event_row(0, 0, "enq", source="a\x00")]}, "postgres"),
    (
        "NUL in an event's detail",
        {"events": [_event_row(0, 0, "enq", detail={"custom_status": "a\x00"})]},
        "postgres",
    ),
    (
        "an unpaired surrogate in a custom status",
        {"upserts": [_job(0, custom_status="\ud800")]},
        "both",
    ),
    (
        "70,000 bytes in an event's source",
        {"events": [_event_row(0, 0, "enq", source="s" * 70_000)]},
        "mysql",
    ),
    (
        "80,000 bytes (20,000 astral characters) in a custom status",
        {"upserts": [_job(0, custom_status="\U0001f600" * 20_000)]},
        "mysql",
    ),
]


@pytest.mark.parametrize(
    ("changes", "refused_by"), [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES]
)
def test_text_a_store_cannot_hold_is_refused_for_good_and_applies_nothing(
    store: LedgerStore, changes: dict[str, Any], refused_by: str
) -> None:
    kind = "fake" if isinstance(store, FakeStore) else store.kind
    store.start_offset("t", 0)
    batch = PartitionBatch("q", "t", 0, 0, 1, **changes)
    if kind != "fake" and refused_by not in (kind, "both"):
        store.commit_partition_batch(batch)  # this store keeps it, as written
        assert store.offset("t", 0) == 1
        if batch.upserts:
            assert store.load_jobs("q", 0, [0]) == {0: batch.upserts[0]}
        else:
            assert store.job_events("q", 0, 0) == batch.events
        return
    with pytest.raises(StoreError) as raised:
        store.commit_partition_batch(batch)
    assert not isinstance(raised.value, StoreUnavailableError)
    assert store.offset("t", 0) == 0
    assert store.load_jobs("q", 0, [0]) == {} and store.job_events("q", 0, 0) == []


def test_a_timeline_row_written_twice_is_a_store_error(store: LedgerStore) -> None:
    topic = _mail(store)
    (row,) = store.job_events("mail", 1, 1)[:1]
    again = PartitionBatch("mail", topic, 1, 1, 2, events=[row])
    with pytest.raises(StoreError) as raised:
        store.commit_partition_batch(again)
    assert not isinstance(raised.value, FencedError)
    assert store.offset(topic, 1) == 1


def test_a_closed_store_raises_store_errors(store: LedgerStore) -> None:
    store.close()
    with pytest.raises(StoreError):
        store.queues()
    with pytest.raises(StoreError):
        store.commit_partition_batch(PartitionBatch("q", "t", 0, 0, 1))


def test_the_fake_fails_on_demand_as_an_unreachable_postgres() -> None:
    fake = FakeStore()
    fake.migrate()
    fake.fail("connection refused")
    with pytest.raises(StoreError, match=r"unreachable.*connection refused"):
        fake.offset("t", 0)
    with pytest.raises(StoreError):
        fake.lookup("q", [(0, 0)], True)
    fake.recover()
    assert fake.start_offset("t", 0) == 0


def test_timeline_rows_carry_the_codec_tags_of_job_events_only(store: LedgerStore) -> None:
    store.start_offset("t", 0)
    tags = list(EVENT_TYPES)
    rows = [_event_row(0, offset, tag) for offset, tag in enumerate(tags)]
    store.commit_partition_batch(PartitionBatch("q", "t", 0, 0, 1, events=rows))
    assert [row.type for row in store.job_events("q", 0, 0)] == tags
    if dialect(store) == "mysql":
        # MariaDB's type CHECK is gone since its migration 0011 (it cannot add a wider
        # one back online, decision 0036): only the projection's codec tags reach it.
        return
    for wrong in ("Enqueued", "qnew"):
        with pytest.raises(StoreError):
            store.commit_partition_batch(
                PartitionBatch("q", "t", 0, 1, 2, events=[_event_row(1, 0, wrong)])
            )
    assert store.offset("t", 0) == 1


def test_a_projector_behind_another_on_the_same_records_is_fenced(store: LedgerStore) -> None:
    # Both fold the same records into the same timeline rows: the second's rows collide
    # with the first's, and what it is told is the fence, not the collision.
    store.start_offset("t", 0)
    rows = [_event_row(7, offset, "ok") for offset in range(3)]
    store.commit_partition_batch(PartitionBatch("q", "t", 0, 0, 3, events=rows))
    stale = PartitionBatch("q", "t", 0, 0, 3, events=rows, upserts=[_job(7)])
    with pytest.raises(FencedError, match="advanced it to 3"):
        store.commit_partition_batch(stale)
    assert store.offset("t", 0) == 3
    assert store.load_jobs("q", 0, [7]) == {}, "a fenced batch applies nothing"
    assert len(store.job_events("q", 0, 7)) == 3


def test_of_two_projectors_racing_from_one_offset_exactly_one_commits(store: LedgerStore) -> None:
    store.start_offset("t", 0)
    start = threading.Barrier(2)
    outcomes: dict[int, str] = {}

    def commit(next_offset: int) -> None:
        # The same timeline rows in both, as two owners of one partition write them.
        rows = [_event_row(9, offset, "ok") for offset in range(3)]
        batch = PartitionBatch(
            "q", "t", 0, 0, next_offset, events=rows, upserts=[_job(next_offset)]
        )
        start.wait()
        try:
            store.commit_partition_batch(batch)
            outcomes[next_offset] = "committed"
        except FencedError:
            outcomes[next_offset] = "fenced"

    threads = [threading.Thread(target=commit, args=(n,)) for n in (3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values()) == ["committed", "fenced"]
    (winner,) = [n for n, outcome in outcomes.items() if outcome == "committed"]
    assert store.offset("t", 0) == winner
    assert list(store.load_jobs("q", 0, [3, 4])) == [winner]


def test_resizes_and_retirements_project_as_the_catalog_folds_them(store: LedgerStore) -> None:
    """Every store projects the catalog's resizes and retirements to the rows the
    in-memory fold gives, one batch or one record at a time (the SQL of each dialect:
    GREATEST, the CASE on retired_from, a retirement only of closed partitions)."""
    log = FakeLog(catalog_topic(PREFIX))
    events: list[Event] = [
        QueueCreated("mail", 6),
        QueueCreated("gone", 2),
        PartitionsRetired("mail", 2, "open partitions never retire"),
        QueueResized("mail", 2, "shrunk"),
        PartitionsRetired("mail", 2, "drained"),
        QueueResized("mail", 1, "shrunk again"),
        QueueResized("mail", 4, "grown: reopens 2 and 3"),
        PartitionsRetired("mail", 6, "undone"),
        QueueDeleted("gone"),
        QueueResized("gone", 5, "names a deleted queue"),
        QueueCreated("gone", 3),
        QueueResized("mail", 8, "grown past its partitions"),
    ]
    for event in events:
        log.append(T0, WORKER, event)
    folded: dict[str, QueueRow] = {}
    for event in events:
        fold_queue_event(folded, event, T0)
    CatalogProjector(store, PREFIX).apply(log.records)
    assert {q.name: q for q in store.queues()} == folded
    mail = folded["mail"]
    assert (mail.partitions, mail.open, mail.retired_from) == (8, 8, 8)
    assert folded["gone"] == QueueRow("gone", 3, T0)

    # The closed partitions' jobs are what a retirement waits for.
    topic = queue_topic(PREFIX, "mail")
    p5 = FakeLog(topic, 5)
    p5.append(T0, WORKER, _enqueued(b"late", 1, T0))
    assert not store.holds_jobs_from("mail", 5)
    PartitionProjector(store, "mail", topic, 5).apply(p5.records)
    assert store.holds_jobs_from("mail", 5)
    assert store.holds_jobs_from("mail", 2)
    assert not store.holds_jobs_from("mail", 6)
    assert not store.holds_jobs_from("gone", 0)


def test_placements_project_as_the_catalog_folds_them(store: LedgerStore) -> None:
    """A partition's first placement stands, only partitions the queue has are placed,
    and a deleted queue's placements go with it (decision 0031): on every store, one
    batch or one record at a time, as the in-memory fold says."""
    records: list[tuple[Event, ...]] = [
        (
            QueueCreated("mail", 2),
            PartitionPlaced("mail", 0, "a", "queue created"),
            PartitionPlaced("mail", 1, "b", "queue created"),
        ),
        (PartitionPlaced("mail", 1, "a", "a second placement: ignored"),),
        (PartitionPlaced("mail", 5, "a", "no such partition"),),
        (PartitionPlaced("nowhere", 0, "a", "no such queue"),),
        (QueueResized("mail", 4, "grown"), PartitionPlaced("mail", 3, "b", "queue resized")),
        (
            QueueCreated("gone", 1),
            PartitionPlaced("gone", 0, "b", "queue created"),
            QueueDeleted("gone"),
        ),
        (QueueCreated("gone", 2), PartitionPlaced("gone", 1, "a", "created again")),
    ]
    folded: dict[str, QueueRow] = {}
    for events in records:
        for event in events:
            fold_queue_event(folded, event, T0)
    assert folded["mail"].shards == ("a", "b", "", "b")
    assert [folded["mail"].shard_of(p) for p in range(4)] == ["a", "b", None, "b"]
    assert folded["gone"].shards == ("", "a")
    log = FakeLog(catalog_topic(PREFIX))
    for events in records:
        log.append(T0, WORKER, *events)
    CatalogProjector(store, PREFIX).apply(log.records)
    assert {q.name: q for q in store.queues()} == folded


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_moves_project_as_the_catalog_folds_them(store: LedgerStore, one_at_a_time: bool) -> None:
    """A move applies only while the partition is on the shard it names ("": unplaced,
    on home): of two moves of a partition the first wins, and a partition moves again
    from where it went (decision 0031)."""
    records: list[tuple[Event, ...]] = [
        (QueueCreated("mail", 3), PartitionPlaced("mail", 0, "a", "queue created")),
        (PartitionMoved("mail", 0, "a", "b", 120),),
        (PartitionMoved("mail", 0, "a", "c", 130),),  # not on a any more: ignored
        (PartitionMoved("mail", 1, "", "c", 0),),  # unplaced: on home
        (PartitionMoved("mail", 1, "c", "a", 7), PartitionMoved("mail", 2, "b", "a", 0)),
        (PartitionMoved("mail", 9, "", "a", 0),),  # no such partition
        (PartitionMoved("nowhere", 0, "", "a", 0),),  # no such queue
    ]
    folded: dict[str, QueueRow] = {}
    for events in records:
        for event in events:
            fold_queue_event(folded, event, T0)
    assert folded["mail"].shards == ("b", "a")
    log = FakeLog(catalog_topic(PREFIX))
    for events in records:
        log.append(T0, WORKER, *events)
    catalog = CatalogProjector(store, PREFIX)
    if one_at_a_time:
        for record in log.records:
            catalog.apply([record])
    else:
        catalog.apply(log.records)
    assert {q.name: q for q in store.queues()} == folded


def test_catalog_records_projected_one_at_a_time_give_the_same_rows(store: LedgerStore) -> None:
    log = FakeLog(catalog_topic(PREFIX))
    for event in (
        QueueCreated("mail", 4),
        QueueResized("mail", 1, "shrunk"),
        PartitionsRetired("mail", 1, "drained"),
        QueueResized("mail", 3, "grown"),
    ):
        log.append(T0, WORKER, event)
    catalog = CatalogProjector(store, PREFIX)
    for record in log.records:
        catalog.apply([record])
    (mail,) = store.queues()
    assert (mail.partitions, mail.open, mail.retired_from) == (4, 3, 3)
    assert [mail.state_of(p) for p in range(4)] == ["serving"] * 3 + ["retired"]


@pytest.mark.not_applicable(
    "sharded",
    reason="a ShardedStore's remove_partition removes what a move left on the shards the "
    "partition is not placed on, never its placed shard's live rows; removing the rows of "
    "the store that holds a partition is each shard's own (the mover calls it shard by "
    "shard, service/shards/moves.py; tests/unit/test_sharded_store.py covers the strays)",
)
def test_a_partition_moved_away_is_removed_in_batches_and_its_projector_fenced(
    store: LedgerStore,
) -> None:
    """After a move (decision 0031) the old shard's rows of the partition go in batches of
    about `limit` rows, its offset row first: a projector still writing there is fenced.
    The queue's other partition keeps everything."""
    topic = _mail(store)
    before = store.partition_jobs("mail", 1)
    assert len(store.partition_jobs("mail", 0)) == 4
    next_offset = store.offset(topic, 0)
    removed = []
    while n := store.remove_partition("mail", topic, 0, limit=2):
        removed.append(n)
    assert removed[:2] == [2, 2]  # the jobs, two by two; then their timeline rows
    assert sum(removed) >= 4 + 7
    assert store.partition_jobs("mail", 0) == {}
    assert store.job_events("mail", 0, 1) == []
    assert (topic, 0) not in store.offsets([(topic, 0), (topic, 1)])
    assert store.partition_jobs("mail", 1) == before
    assert store.job_events("mail", 1, 0) != []
    with pytest.raises(PartitionGoneError):
        store.commit_partition_batch(
            PartitionBatch("mail", topic, 0, next_offset, next_offset + 1, upserts=[_job(9)])
        )


# -- partitions placed on another shard -----------------------------------------------


def _two_partitions(store: LedgerStore) -> None:
    """Queue "q": partition 0 holds job 0 (due) and job 1 (imported, claimed); partition
    1, projected later, job 0 (due, older) and job 1 (imported, future, priority 2).
    Queue "r": job 0 in partition 1."""
    _create_queues(store, ("q", 2), ("r", 2))
    topic = queue_topic(PREFIX, "q")
    p0, p1, r1 = FakeLog(topic, 0), FakeLog(topic, 1), FakeLog(queue_topic(PREFIX, "r"), 1)
    imported = dataclasses.replace(_enqueued(b"i0", 1, T0), imported_from="q:s1:p2:7")
    p0.append(T0, WORKER, _enqueued(b"a", 1, T0 - 10), imported)
    p0.append(T0 + 10, WORKER, Claimed(1, "c1"))
    imported = dataclasses.replace(_enqueued(b"c", 2, T0 + 60_000), imported_from="q:s1:p2:8")
    p1.append(T0 + 50, WORKER, _enqueued(b"b", 1, T0 - 20), imported)
    r1.append(T0, WORKER, _enqueued(b"r", 1, T0))
    assert PartitionProjector(store, "q", topic, 0).apply(p0.records) == 3
    assert PartitionProjector(store, "q", topic, 1).apply(p1.records) == 2
    assert PartitionProjector(store, "r", r1.topic, 1).apply(r1.records) == 1


def _queue_wide_reads(store: LedgerStore) -> dict[str, Any]:
    """Every read of queue "q" that names no partition, at T0 + 30."""
    now, old_0, old_1 = T0 + 30, "q:s1:p2:7", "q:s1:p2:8"

    def keys(rows: list[JobRow]) -> list[tuple[int, int]]:
        return [(r.partition, r.job.local_id) for r in rows]

    return {
        "due": store.count(JobFilter("q", PENDING), now, future=False),
        "future": store.count(JobFilter("q", PENDING), now, future=True),
        "running": store.count(JobFilter("q", IN_PROGRESS), now, future=False),
        "scan": keys(store.scan(JobFilter("q", PENDING), now, False, None, 10)),
        "select": keys(store.select(JobFilter("q", PENDING, priority=1), 10)),
        "find": keys(store.find_jobs(JobSearch("q", PENDING), None, 10)),
        "tally": store.queue_tally("q", now, 3, 100),
        "oldest_due": store.oldest_due("q", now, 3),
        "as_of": store.counts_as_of("q", now),
        "dequeue_order": store.due_in_dequeue_order("q", now, 10),
        "last_event": store.last_event_time("q"),
        "rates": store.event_buckets("q", ["enq", "clm"], T0, T0 + 60_000, 60_000),
        "from_1": store.holds_jobs_from("q", 1),
        "from_0": store.holds_jobs_from("q", 0),
        "counts": store.job_counts(),
        "imported": sorted(str(d) for d in store.imported("q", [old_0, old_1]).values()),
    }


@pytest.mark.not_applicable(
    "sharded",
    reason="a ShardedStore tells each of its shards what to hide from the placements, and "
    "refuses a caller's hide; tests/unit/test_sharded_store.py holds it to leaving a "
    "partition on two shards during a move out of the shard it is not placed on",
)
def test_hidden_partitions_are_left_out_of_queue_wide_reads(store: LedgerStore) -> None:
    """A store told to hide a queue's partitions (placed on another shard: during a move
    both shards hold their rows, decision 0031) leaves their rows out of every read of
    the whole queue, and only theirs; reads naming a partition still see them. Each call
    replaces the last; told nothing, the store reads them all again."""
    _two_partitions(store)
    everything = _queue_wide_reads(store)
    assert everything == {
        "due": 2,
        "future": 1,
        "running": 1,
        "scan": [(0, 0), (1, 0)],
        "select": [(1, 0), (0, 0)],
        "find": [(1, 1), (0, 0), (1, 0)],
        "tally": QueueTally(2, 1, 1, 0, 0),
        "oldest_due": T0 - 20,
        "as_of": [
            StateCount(PENDING, 1, False, 2),
            StateCount(PENDING, 2, True, 1),
            StateCount(IN_PROGRESS, 1, False, 1),
        ],
        "dequeue_order": [DueJob(1, 0, 1, T0 - 20), DueJob(0, 0, 1, T0 - 10)],
        "last_event": T0 + 50,
        "rates": [EventBucket(T0, "clm", 1), EventBucket(T0, "enq", 4)],
        "from_1": True,
        "from_0": True,
        "counts": [
            JobCount("q", PENDING, 1, 2),
            JobCount("q", PENDING, 2, 1),
            JobCount("q", IN_PROGRESS, 1, 1),
            JobCount("r", PENDING, 1, 1),
        ],
        "imported": ["q:s0:p1:1", "q:s1:p2:1"],
    }

    store.hide({"q": [1]})
    assert _queue_wide_reads(store) == {
        "due": 1,
        "future": 0,
        "running": 1,
        "scan": [(0, 0)],
        "select": [(0, 0)],
        "find": [(0, 0)],
        "tally": QueueTally(1, 0, 1, 0, 0),
        "oldest_due": T0 - 10,
        "as_of": [StateCount(PENDING, 1, False, 1), StateCount(IN_PROGRESS, 1, False, 1)],
        "dequeue_order": [DueJob(0, 0, 1, T0 - 10)],
        "last_event": T0 + 10,
        "rates": [EventBucket(T0, "clm", 1), EventBucket(T0, "enq", 2)],
        "from_1": False,
        "from_0": True,
        # Another queue's partition 1 is not hidden.
        "counts": [
            JobCount("q", PENDING, 1, 1),
            JobCount("q", IN_PROGRESS, 1, 1),
            JobCount("r", PENDING, 1, 1),
        ],
        "imported": ["q:s0:p1:1"],
    }
    assert store.count(JobFilter("r", PENDING), T0 + 30, future=False) == 1
    # Reads that name the partition: an owner's, a lookup, the verify's.
    assert sorted(store.partition_jobs("q", 1)) == [0, 1]
    assert len(store.lookup("q", [(1, 0), (1, 1)], include_body=False)) == 2
    assert [h.job.local_id for h in store.stream_jobs("q", 1, None, None)] == [0, 1]

    # Partitions 10 and 11 are not partition 1 (MariaDB's list is a string).
    store.hide({"q": [10, 11], "r": [1]})
    assert _queue_wide_reads(store) == everything | {"counts": everything["counts"][:-1]}
    store.hide({})
    assert _queue_wide_reads(store) == everything
