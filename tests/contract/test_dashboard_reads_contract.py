"""The dashboard's Store reads (find_jobs, oldest_due, event_buckets, queue_tally), on the
real Postgres and MariaDB adapters, a sharded store and the FakeStore alike."""

from __future__ import annotations

import pytest

from pinledger.ledger.events import Claimed, Enqueued, Failed, Succeeded
from pinledger.ledger.log import queue_topic
from pinledger.ledger.state import JobState
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import (
    EventBucket,
    InvalidRegexError,
    JobSearch,
    LedgerStore,
    QueueTally,
    ScanKey,
)
from tests.contract.store_fixtures import PREFIX, store
from tests.contract.test_store_contract import T0, WORKER, FakeLog, _create_queues, _mail

__all__ = ["store"]  # the fixture, used by name

PENDING, SUCCEEDED = JobState.PENDING, JobState.SUCCEEDED


def test_the_finder_pages_newest_first_with_bodies(store: LedgerStore) -> None:
    _mail(store)
    search = JobSearch("mail", PENDING)

    def page(after: ScanKey | None) -> list[tuple[int, int, bytes]]:
        rows = store.find_jobs(search, after, 2)
        return [(r.partition, r.job.local_id, r.job.body) for r in rows]

    # Due and future jobs alike: job 2 of partition 0 runs a minute after T0.
    first = page(None)
    assert first == [(0, 2, b"gamma\x00\xff"), (1, 1, b"epsilon")]
    second = page(ScanKey(T0, 1, 1))
    assert second == [(1, 0, b"alpha2"), (0, 1, b"beta")]
    assert page(ScanKey(T0, 0, 1)) == [(0, 3, b"delta")]
    assert page(ScanKey(T0 - 10, 0, 3)) == []


def test_the_finder_filters_by_priority_body_and_custom_status(store: LedgerStore) -> None:
    _mail(store)

    def found(search: JobSearch) -> list[tuple[int, int]]:
        return [(r.partition, r.job.local_id) for r in store.find_jobs(search, None, 10)]

    assert found(JobSearch("mail", PENDING, priority=1)) == [(0, 2), (1, 0), (0, 3)]
    assert found(JobSearch("mail", PENDING, body_regex="^alpha")) == [(1, 0)]
    assert found(JobSearch("mail", SUCCEEDED, status_regex="done$")) == [(0, 0)]
    assert found(JobSearch("mail", SUCCEEDED, status_regex="^nothing")) == []
    assert found(JobSearch("other", PENDING)) == []
    with pytest.raises(InvalidRegexError):
        store.find_jobs(JobSearch("mail", PENDING, status_regex="(unclosed"), None, 10)


def test_the_oldest_due_job_is_the_smallest_due_run_after(store: LedgerStore) -> None:
    _mail(store)
    assert store.oldest_due("mail", T0 + 30, 3) == T0 - 10
    # Priority 1 only: the same job; a moment before anything was due: none.
    assert store.oldest_due("mail", T0 + 30, 1) == T0 - 10
    assert store.oldest_due("mail", T0 - 11, 3) is None
    assert store.oldest_due("other", T0 + 30, 3) is None


def test_events_are_counted_per_type_and_bucket(store: LedgerStore) -> None:
    _mail(store)
    buckets = store.event_buckets("mail", ["enq", "ok"], T0, T0 + 60, 15)
    # Six enqueues at T0; the ack of job 0 at T0 + 20 (the rejected ack of job 3 at the
    # same time is not counted: it completed nothing).
    assert buckets == [EventBucket(T0, "enq", 6), EventBucket(T0 + 15, "ok", 1)]
    assert store.event_buckets("mail", ["enq"], T0 + 1, T0 + 60, 15) == []
    assert store.event_buckets("mail", ["clm"], T0, T0 + 60, 60) == [EventBucket(T0, "clm", 1)]


def _tally_queue(store: LedgerStore) -> None:
    """Queue "tally", one partition: jobs 0 and 1 due (priorities 1 and 2), job 2 due a
    minute after T0 (priority 3), jobs 3 and 6 running, job 4 succeeded, job 5 failed
    for good."""
    _create_queues(store, ("tally", 1))
    log = FakeLog(queue_topic(PREFIX, "tally"))
    jobs = [(1, T0 - 5), (2, T0), (3, T0 + 60_000), (1, T0), (1, T0), (2, T0), (1, T0)]
    log.append(
        T0,
        WORKER,
        *(Enqueued(body=b"x", priority=p, run_after=r, attempts_allowed=1) for p, r in jobs),
    )
    log.append(T0 + 10, WORKER, *(Claimed(i, "c1") for i in (3, 4, 5, 6)))
    log.append(T0 + 20, WORKER, Succeeded(4), Failed(5))
    PartitionProjector(store, "tally", log.topic, 0).apply(log.records)


def test_the_tally_counts_a_queues_jobs_by_state_up_to_the_cap(store: LedgerStore) -> None:
    _tally_queue(store)
    assert store.queue_tally("tally", T0 + 30, 3, 100) == QueueTally(2, 1, 2, 1, 1)
    # Each count stops at the cap.
    assert store.queue_tally("tally", T0 + 30, 3, 1) == QueueTally(1, 1, 1, 1, 1)
    # Pending jobs of priority 1 only; the other states whatever their priority.
    assert store.queue_tally("tally", T0 + 30, 1, 100) == QueueTally(1, 0, 2, 1, 1)
    # Before anything was due, every pending job waits.
    assert store.queue_tally("tally", T0 - 10, 3, 100) == QueueTally(0, 3, 2, 1, 1)
    assert store.queue_tally("other", T0 + 30, 3, 100) == QueueTally(0, 0, 0, 0, 0)
