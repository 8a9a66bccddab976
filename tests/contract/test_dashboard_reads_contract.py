"""The dashboard's Store reads (find_jobs, oldest_due, event_buckets), on the real
Postgres adapter and on the FakeStore alike."""

from __future__ import annotations

import pytest

from pinledger.ledger.state import JobState
from pinledger.projections.store import (
    EventBucket,
    InvalidRegexError,
    JobSearch,
    LedgerStore,
    ScanKey,
)
from tests.contract.store_fixtures import store
from tests.contract.test_store_contract import T0, _mail

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
