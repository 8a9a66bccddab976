"""The verify's streams of the Store port (projections/store.py `stream_jobs`,
`stream_events`): the same tests on Postgres, MySQL and the FakeStore. What they return
is what the verify compares the log's fold with, row for row."""

from __future__ import annotations

from pinledger.ledger.state import JobState
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import store
from tests.contract.test_store_contract import TP, _mail

__all__ = ["store"]  # the fixture, used by name


def test_a_partitions_jobs_stream_by_local_id_with_bodies_and_trace_contexts(
    store: LedgerStore,
) -> None:
    _mail(store)
    streamed = list(store.stream_jobs("mail", 0, None, None))
    assert [held.job.local_id for held in streamed] == [0, 1, 2, 3]
    assert [held.job for held in streamed] == [store.partition_jobs("mail", 0)[i] for i in range(4)]
    assert streamed[2].job.body == b"gamma\x00\xff"
    assert streamed[0].job.state is JobState.SUCCEEDED
    assert {held.traceparent for held in streamed} == {TP}
    assert [held.job.body for held in store.stream_jobs("mail", 1, None, None)] == [
        b"alpha2",
        b"epsilon",
    ]


def test_a_jobs_stream_keeps_to_its_range_of_local_ids(store: LedgerStore) -> None:
    _mail(store)
    assert [h.job.local_id for h in store.stream_jobs("mail", 0, 1, 3)] == [1, 2]
    assert [h.job.local_id for h in store.stream_jobs("mail", 0, 2, None)] == [2, 3]
    assert [h.job.local_id for h in store.stream_jobs("mail", 0, None, 1)] == [0]
    assert list(store.stream_jobs("mail", 0, 4, None)) == []
    assert list(store.stream_jobs("nothing", 0, None, None)) == []


def test_a_partitions_timeline_streams_in_log_order_from_an_offset(store: LedgerStore) -> None:
    _mail(store)
    streamed = list(store.stream_events("mail", 0, 0))
    assert [(r.offset, r.idx, r.local_id, r.type) for r in streamed] == [
        (0, 0, 0, "enq"),
        (0, 1, 1, "enq"),
        (0, 2, 2, "enq"),
        (0, 3, 3, "enq"),
        (1, 0, 0, "clm"),
        (2, 0, 0, "ok"),
        (2, 1, 3, "ok"),
    ]
    by_job = {i: store.job_events("mail", 0, i) for i in range(4)}
    assert streamed == sorted(
        (row for rows in by_job.values() for row in rows), key=lambda r: (r.offset, r.idx)
    ), "the same rows as a job's timeline, detail and all"
    assert [(r.offset, r.idx) for r in store.stream_events("mail", 0, 2)] == [(2, 0), (2, 1)]
    assert len(list(store.stream_events("mail", 1, 0))) == 2


def test_a_stream_stopped_early_leaves_the_store_usable(store: LedgerStore) -> None:
    _mail(store)
    for _ in range(12):  # more than a pool holds: each stopped stream gave its connection back
        events = store.stream_events("mail", 0, 0)
        next(iter(events))
        getattr(events, "close", lambda: None)()
    assert len(list(store.stream_jobs("mail", 0, None, None))) == 4
