"""The verify's streams of the Store port (projections/store.py `stream_jobs`,
`stream_events`): the same tests on Postgres, MySQL, a sharded store and the FakeStore.
What they return is what the verify compares the log's fold with, row for row."""

from __future__ import annotations

from pinledger.ledger.events import Actor, Checkpointed, Claimed, Succeeded
from pinledger.ledger.log import queue_topic
from pinledger.ledger.state import JobState
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.row_text import EVENT_COLUMNS, columns, event_line, job_line
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import PREFIX, store
from tests.contract.test_store_contract import (
    T0,
    TP,
    WORKER,
    FakeLog,
    _create_queues,
    _enqueued,
    _mail,
)

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
        for stream in (store.stream_events("mail", 0, 0), store.event_lines("mail", 0, 0)):
            next(iter(stream))
            getattr(stream, "close", lambda: None)()
    assert len(list(store.stream_jobs("mail", 0, None, None))) == 4


ODD = 'tab\there, line\nbreak, back\\slash, "quotes", \x01ctl, \x0bvt, é ✓'


def test_lines_are_the_rows_as_postgres_prints_them_odd_text_and_all(store: LedgerStore) -> None:
    # The fold's lines (row_text) and the store's must agree byte for byte, or a
    # consistent projection would verify as different.
    _create_queues(store, ("odd", 1))
    topic = queue_topic(PREFIX, "odd")
    log = FakeLog(topic)
    log.append(T0, WORKER, _enqueued(b"\x00\xff\\\t\n", 1, T0), traceparent=TP)
    log.append(T0 + 1, Actor(ODD, ODD, ODD), Claimed(0, ODD))
    log.append(T0 + 2, WORKER, Checkpointed(0, prepend_status=ODD, claim=ODD, new_body=b""))
    log.append(T0 + 3, WORKER, Succeeded(0, ODD), Succeeded(77, ODD))
    PartitionProjector(store, "odd", topic, 0).apply(log.records)
    jobs = list(store.stream_jobs("odd", 0, None, None))
    assert ODD in jobs[0].job.custom_status
    assert list(store.job_lines("odd", 0, None, None)) == [
        job_line(h.job, h.traceparent) for h in jobs
    ]
    events = list(store.stream_events("odd", 0, 0))
    assert len(events) == 5
    lines = list(store.event_lines("odd", 0, 0))
    assert lines == [event_line(row) for row in events]
    assert list(store.event_lines("odd", 0, 2)) == lines[2:]
    assert columns(lines[1], EVENT_COLUMNS)["source"] == ODD
    assert columns(lines[1], EVENT_COLUMNS)["claim"] == ODD
    assert columns(lines[0], EVENT_COLUMNS)["claim"] is None


def test_the_lines_of_the_mail_queue_are_its_rows(store: LedgerStore) -> None:
    _mail(store)
    for partition in (0, 1):
        assert list(store.job_lines("mail", partition, 1, None)) == [
            job_line(h.job, h.traceparent) for h in store.stream_jobs("mail", partition, 1, None)
        ]
        assert list(store.event_lines("mail", partition, 0)) == [
            event_line(row) for row in store.stream_events("mail", partition, 0)
        ]
