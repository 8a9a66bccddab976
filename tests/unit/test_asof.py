"""`replay --as-of`: parsing the moment, and why one job is dequeued before another."""

from __future__ import annotations

import pytest

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.state import Job, JobState
from pinledger.projections.asof import AsOf, parse_as_of, why_first
from pinledger.projections.projector import Bound
from tests.unit.factories import NOW, make_job

A = JobDescriptor("q", 0, 1, 3000)
B = JobDescriptor("q", 1, 2, 2000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", AsOf("offset", 42)),
        ("offset:7", AsOf("offset", 7)),
        ("1700000000000", AsOf("time", 1_700_000_000_000)),
        ("time:1700000000000", AsOf("time", 1_700_000_000_000)),
        ("2023-11-14T22:13:20", AsOf("time", 1_700_000_000_000)),
        ("2023-11-14T23:13:20+01:00", AsOf("time", 1_700_000_000_000)),
    ],
)
def test_parse_as_of(text: str, expected: AsOf) -> None:
    assert parse_as_of(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "offset:x", "time:noon"])
def test_parse_as_of_says_what_it_expected(text: str) -> None:
    with pytest.raises(ValueError, match="offset"):
        parse_as_of(text)


def test_an_offset_includes_its_record_and_a_time_its_millisecond() -> None:
    assert AsOf("offset", 7).bound() == Bound(offset=8)
    assert AsOf("time", 5).bound() == Bound(at=5)


def pending(**changes: object) -> Job:
    return make_job(JobState.PENDING, **changes)


@pytest.mark.parametrize(
    ("a", "b", "first", "says"),
    [
        (pending(priority=1), pending(priority=2), A, "priority 1 is taken before priority 2"),
        (pending(priority=3), pending(priority=2), B, "priority 2 is taken before priority 3"),
        (
            pending(priority=2, run_after=NOW - 10),
            pending(priority=2, run_after=NOW - 20),
            B,
            "same priority 2; it was due earlier",
        ),
        (
            pending(priority=2, run_after=NOW, local_id=3000),
            pending(priority=2, run_after=NOW, local_id=2000),
            B,
            "its local id is lower",
        ),
        (pending(run_after=NOW + 1), pending(priority=3), B, "was not due until"),
        (make_job(JobState.IN_PROGRESS), pending(), B, "was IN_PROGRESS"),
        (pending(), None, A, "did not exist then"),
        (None, make_job(JobState.SUCCEEDED), None, "neither"),
    ],
)
def test_why_first(a: Job | None, b: Job | None, first: JobDescriptor | None, says: str) -> None:
    got, reason = why_first((A, a), (B, b), NOW)
    assert got == first
    assert says in reason


def test_same_partition_ties_go_by_log_order() -> None:
    c = JobDescriptor("q", 0, 2, 9001)
    d = JobDescriptor("q", 0, 2, 4002)
    job = pending(priority=2, run_after=NOW, local_id=4002)
    got, reason = why_first((c, pending(priority=2, run_after=NOW, local_id=9001)), (d, job), NOW)
    assert got == d
    assert "enqueued at offset 4, the other at 9" in reason
