"""The projection writer's merge and thread (service/ownership/projection_writer.py,
projections/merge.py): committing a merge of N folded batches leaves the store as
committing each in turn; folds that read jobs of batches not yet committed from memory
give the same store as folding and committing one batch at a time; commit errors
reach the owner thread; memory is bounded."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.ledger import codec
from pinledger.ledger.events import (
    Actor,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Envelope,
    Event,
    Failed,
    Retried,
    Succeeded,
)
from pinledger.ledger.log import LogRecord
from pinledger.ledger.state import Job, JobState
from pinledger.projections.merge import merge_batches
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import (
    EventRow,
    FencedError,
    ImportedJob,
    PartitionBatch,
    StoreUnavailableError,
)
from pinledger.service.ownership import projection_writer
from pinledger.service.ownership.projection_writer import ProjectionWriter
from pinledger.service.testing.fake_store import FakeStore
from tests.unit.factories import make_job

TOPIC = "t"
KEY = (TOPIC, 0)
W = Actor(source="worker:1", request_id="r", server="s1")


def _state(store: FakeStore) -> tuple[Any, ...]:
    return (store._offsets, store._jobs, store._events, store._imported)


def _store() -> FakeStore:
    """A store where queue q has partition 0 of topic t, at offset 0."""
    store = FakeStore()
    store.migrate()
    _create_queue(store)
    return store


def _create_queue(store: FakeStore) -> None:
    store.offset(TOPIC, 0)  # the partition starts at offset 0


# -- the merge, on batches as the store sees them ------------------------------------


def _row(local_id: int, offset: int, idx: int) -> EventRow:
    return EventRow(
        local_id=local_id,
        offset=offset,
        idx=idx,
        type="enq",
        at=1_700_000_000_000 + offset,
        source="s",
        request_id="r",
        server="s1",
        claim=None,
        applied=True,
        verdict="applied",
        state_after=0,
        attempts_remaining_after=1,
        detail={},
        traceparent=None,
    )


_ids = st.integers(min_value=0, max_value=5)
_states = st.sampled_from([JobState.PENDING, JobState.IN_PROGRESS, JobState.SUCCEEDED])


@st.composite
def _batches(draw: st.DrawFn) -> list[PartitionBatch]:
    batches = []
    offset = 1
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        size = draw(st.integers(min_value=1, max_value=3))
        upserted = draw(st.lists(_ids, unique=True, max_size=4))
        batch = PartitionBatch(
            "q",
            TOPIC,
            0,
            expected_offset=offset,
            next_offset=offset + size,
            upserts=[
                make_job(
                    draw(_states),
                    local_id=i,
                    created_at=draw(st.integers(1, 3)),
                    custom_status=str(offset),
                )
                for i in upserted
            ],
            removals=draw(st.lists(_ids, unique=True, max_size=3)),
            events=[_row(draw(_ids), offset + k, 0) for k in range(size)],
            traceparents={i: f"tp-{offset}-{i}" for i in draw(st.lists(_ids, max_size=3))},
            imported={
                offset * 1000 + k: ImportedJob(draw(st.sampled_from(["x", "y", "z"])), 1)
                for k in range(draw(st.integers(min_value=0, max_value=2)))
            },
        )
        batches.append(batch)
        offset += size
    return batches


@given(
    before=st.lists(_ids, unique=True, max_size=4),
    batches=_batches(),
)
@settings(max_examples=300, deadline=None)
def test_committing_a_merge_leaves_the_store_as_committing_each_batch(
    before: list[int], batches: list[PartitionBatch]
) -> None:
    one_by_one, merged = _store(), _store()
    for store in (one_by_one, merged):
        # Rows from earlier batches: an upsert keeps their created_at and trace context.
        store.commit_partition_batch(
            PartitionBatch(
                "q",
                TOPIC,
                0,
                0,
                1,
                upserts=[make_job(local_id=i, created_at=0) for i in before],
                traceparents={i: "tp-before" for i in before},
            )
        )
    for batch in batches:
        one_by_one.commit_partition_batch(batch)
    merged.commit_partition_batch(merge_batches(batches))
    assert _state(merged) == _state(one_by_one)


def test_only_consecutive_batches_of_one_partition_merge() -> None:
    a = PartitionBatch("q", TOPIC, 0, 0, 2)
    with pytest.raises(ValueError):
        merge_batches([a, PartitionBatch("q", TOPIC, 0, 3, 4)])
    with pytest.raises(ValueError):
        merge_batches([a, PartitionBatch("q", TOPIC, 1, 2, 4)])
    assert merge_batches([a]) is a


# -- folds reading what is not committed yet ----------------------------------------


class _NoCache:
    """A cache that holds nothing: every job an event names comes from the batches
    not yet committed or from the store."""

    def lookup(self, ids: Iterable[int]) -> dict[int, Job]:
        return {}

    def absorb(self, jobs: Mapping[int, Job | None]) -> None:
        pass


def _event(kind: str, local_id: int, claim: str) -> Event:
    if kind == "clm":
        return Claimed(local_id, claim)
    if kind == "ok":
        return Succeeded(local_id, "", claim)
    if kind == "fail":
        return Failed(local_id, 0, "", claim)
    if kind == "rtry":
        return Retried(local_id, 2, 0)
    if kind == "del":
        return Deleted(local_id)
    return Collected(local_id)


@st.composite
def _log(draw: st.DrawFn) -> list[LogRecord]:
    """Records of one partition: enqueues, and claims, acks, retries, deletions and
    collections of the jobs enqueued before them."""
    records: list[LogRecord] = []
    known: list[int] = []
    for offset in range(draw(st.integers(min_value=1, max_value=25))):
        events: list[Event] = []
        for idx in range(draw(st.integers(min_value=1, max_value=3))):
            kind = draw(st.sampled_from(["enq", "clm", "ok", "fail", "rtry", "del", "gc"]))
            if kind == "enq" or not known:
                events.append(Enqueued(b"x", 1, 0, 2))
                known.append(offset * 1000 + idx)
                continue
            local_id = draw(st.sampled_from(known))
            claim = draw(st.sampled_from(["c1", "c2"]))
            events.append(_event(kind, local_id, claim))
        envelope = Envelope(1_700_000_000_000 + offset, W, tuple(events))
        records.append(LogRecord(TOPIC, 0, offset, codec.encode(envelope), []))
    return records


@given(records=_log(), data=st.data())
@settings(max_examples=200, deadline=None)
def test_folding_ahead_of_the_commits_gives_the_store_of_one_commit_per_batch(
    records: list[LogRecord], data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.sets(st.integers(1, len(records) - 1))) if len(records) > 1 else [])
    chunks = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True)]
    # Which folded batches are committed together (the writer merges what queued).
    commit_after = data.draw(st.lists(st.booleans(), min_size=len(chunks), max_size=len(chunks)))
    one_by_one, ahead = _store(), _store()
    synchronous = PartitionProjector(one_by_one, "q", TOPIC, 0, cache=_NoCache())
    folding = PartitionProjector(ahead, "q", TOPIC, 0, cache=_NoCache())
    queued: list[PartitionBatch] = []
    for chunk, commit in zip(chunks, commit_after, strict=True):
        synchronous.apply(chunk)
        folded = folding.fold(chunk)
        assert folded is not None
        queued.append(folded)
        if commit:
            ahead.commit_partition_batch(merge_batches(queued))
            folding.committed(queued[-1].next_offset)
            queued = []
    if queued:
        ahead.commit_partition_batch(merge_batches(queued))
    assert _state(ahead) == _state(one_by_one)


# -- the thread ------------------------------------------------------------------------


class _Gated(FakeStore):
    """Holds every commit until `release` is set; `error` makes the next commit raise."""

    def __init__(self) -> None:
        super().__init__()
        self.migrate()
        _create_queue(self)
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.error: Exception | None = None
        self.committed: list[PartitionBatch] = []

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        self.entered.release()
        assert self.release.wait(10)
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        super().commit_partition_batch(batch)
        self.committed.append(batch)


def _batch(start: int, end: int, events: int = 1) -> PartitionBatch:
    return PartitionBatch(
        "q",
        TOPIC,
        0,
        start,
        end,
        upserts=[make_job(local_id=start)],
        events=[_row(start, start, k) for k in range(events)],
    )


def _writer(store: FakeStore) -> tuple[ProjectionWriter, PartitionProjector]:
    writer = ProjectionWriter(store)
    writer.start()
    return writer, PartitionProjector(store, "q", TOPIC, 0)


def test_batches_queued_while_a_commit_runs_go_in_one_transaction() -> None:
    store = _Gated()
    writer, projector = _writer(store)
    writer.submit(KEY, projector, _batch(0, 1))
    assert store.entered.acquire(timeout=5)
    for n in range(1, 5):
        writer.submit(KEY, projector, _batch(n, n + 1))
    store.release.set()
    writer.flush([KEY])
    assert [(b.expected_offset, b.next_offset) for b in store.committed] == [(0, 1), (1, 5)]
    assert projector.committed_offset == 5 and writer.idle()
    writer.close()


def test_a_failed_commit_reaches_the_owner_and_drops_what_queued_behind_it() -> None:
    store = _Gated()
    writer, projector = _writer(store)
    store.error = FencedError("fenced (the test)")
    writer.submit(KEY, projector, _batch(0, 1))
    assert store.entered.acquire(timeout=5)
    writer.submit(KEY, projector, _batch(1, 2))
    store.release.set()
    with pytest.raises(FencedError):
        writer.flush([KEY])
    assert list(writer.take_errors()) == [KEY]
    assert writer.idle() and store.committed == [] and projector.committed_offset == 0
    # The writer goes on: the partition adopted again commits.
    again = PartitionProjector(store, "q", TOPIC, 0)
    writer.submit(KEY, again, _batch(0, 1))
    writer.flush([KEY])
    assert again.committed_offset == 1
    writer.close()


def test_discard_forgets_what_queued_and_waits_for_the_commit_in_flight() -> None:
    store = _Gated()
    writer, projector = _writer(store)
    store.error = StoreUnavailableError("down (the test)")
    writer.submit(KEY, projector, _batch(0, 1))
    assert store.entered.acquire(timeout=5)
    writer.submit(KEY, projector, _batch(1, 2))
    done = threading.Event()

    def discard() -> None:
        writer.discard(KEY)
        done.set()

    thread = threading.Thread(target=discard)
    thread.start()
    assert not done.wait(0.05)  # the commit in flight holds it
    store.release.set()
    assert done.wait(5)
    # A forgotten partition's error is no news.
    assert writer.take_errors() == {} and writer.idle()
    writer.close()


def test_the_owner_waits_while_too_many_events_are_uncommitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(projection_writer, "MAX_UNCOMMITTED_EVENTS", 3)
    store = _Gated()
    writer, projector = _writer(store)
    writer.submit(KEY, projector, _batch(0, 1, events=2))
    assert store.entered.acquire(timeout=5)
    writer.submit(KEY, projector, _batch(1, 2, events=2))
    blocked = threading.Event()
    submitted = threading.Event()

    def third() -> None:
        blocked.set()
        writer.submit(KEY, projector, _batch(2, 3, events=2))
        submitted.set()

    threading.Thread(target=third).start()
    assert blocked.wait(5)
    assert not submitted.wait(0.05)  # 4 events held: over the bound
    store.release.set()
    assert submitted.wait(5)
    writer.flush([KEY])
    assert projector.committed_offset == 3
    writer.close()


def test_close_commits_what_is_queued_then_stops() -> None:
    store = _Gated()
    writer, projector = _writer(store)
    writer.submit(KEY, projector, _batch(0, 1))
    writer.submit(KEY, projector, _batch(1, 2))
    store.release.set()
    writer.close()
    assert not writer.alive
    assert store.offset(TOPIC, 0) == 2


def test_a_fold_reads_a_job_of_a_batch_not_yet_committed_from_memory() -> None:
    store = _store()
    projector = PartitionProjector(store, "q", TOPIC, 0, cache=_NoCache())
    enqueue = Envelope(1, W, (Enqueued(b"x", 1, 0, 2),))
    claim = Envelope(2, W, (Claimed(0, "c1"),))
    ack = Envelope(3, W, (Succeeded(0, "", "c1"),))
    records = [
        LogRecord(TOPIC, 0, o, codec.encode(e), []) for o, e in enumerate([enqueue, claim, ack])
    ]
    first, second = projector.fold(records[:2]), projector.fold(records[2:])
    assert first is not None and second is not None
    assert [e.applied for e in second.events] == [True]
    assert dataclasses.replace(second.upserts[0]).state is JobState.SUCCEEDED
    # Committed: the next fold reads the store again.
    store.commit_partition_batch(merge_batches([first, second]))
    projector.committed(second.next_offset)
    projector._prune()
    assert projector._pending == {}
