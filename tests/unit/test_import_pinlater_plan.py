"""The events `pinledger import-pinlater` appends for a PinLater job, folded through the
state machine: every state comes out as PinLater held it (cli/
import_pinlater.py)."""

from __future__ import annotations

import pytest

from pinledger.cli.import_guard import ImportRefusedError
from pinledger.cli.import_pinlater import (
    SOURCE,
    check_importable,
    enqueue_event,
    follow_ups,
)
from pinledger.ledger.events import Actor
from pinledger.ledger.state import Job, JobState, Stamp, evolve
from pinledger.projections.pinlater.reader import PinLaterJob

NOW = 1_700_000_000_000
PAST, FUTURE = NOW - 60_000, NOW + 3_600_000
P, IP, OK, KO = JobState.PENDING, JobState.IN_PROGRESS, JobState.SUCCEEDED, JobState.FAILED


def _fold(row: PinLaterJob) -> Job:
    stamp = Stamp(NOW, Actor(source=SOURCE))
    job, verdict = evolve(None, enqueue_event(row, 2, NOW), stamp, local_id=7)
    assert verdict.applied
    for event in follow_ups(row, 7):
        job, verdict = evolve(job, event, stamp)  # type: ignore[arg-type]
        assert verdict.applied, (event, verdict)
    assert job is not None
    return job


@pytest.mark.parametrize(
    ("state", "allowed", "remaining", "run_after", "expected_remaining"),
    [
        (P, 3, 3, PAST, 3),
        (P, 5, 2, PAST, 2),
        (P, 2, 2, FUTURE, 2),
        (P, 4, 1, FUTURE, 1),
        (P, 2, 0, PAST, 1),  # a pending job always keeps an attempt to run
        (IP, 3, 2, PAST, 2),
        (IP, 1, 1, FUTURE, 1),
        (OK, 2, 2, PAST, 2),
        (OK, 3, 1, PAST, 1),
        (KO, 3, 0, PAST, 0),
        (KO, 1, 0, PAST, 0),
        (KO, 0, 0, PAST, 0),
    ],
)
def test_the_folded_events_give_the_pinlater_state(
    state: JobState, allowed: int, remaining: int, run_after: int, expected_remaining: int
) -> None:
    row = PinLaterJob(7, int(state), "h:w:1", allowed, remaining, "st", PAST, run_after, PAST, b"b")
    job = _fold(row)
    assert (job.state, job.attempts_allowed, job.attempts_remaining) == (
        state,
        allowed,
        expected_remaining,
    )
    assert (job.custom_status, job.body, job.priority) == ("st", b"b", 2)
    if state is P:
        assert job.run_after == run_after
    if state is IP:
        assert (job.claim, job.claim_source) == ("h:w:1", SOURCE)


@pytest.mark.parametrize(
    ("status", "claim", "old", "said"),
    [
        ("done\x00", None, "q:s1:p1:7", "customStatus contains NUL"),
        ("ok", "h\ud800", "q:s1:p1:7", "PinLater claim descriptor contains an unpaired surrogate"),
        ("ok", None, "q:s" + "x" * 400 + ":p1:7", "the limit is 400"),
    ],
)
def test_a_job_whose_text_no_store_can_hold_is_refused_by_name(
    status: str, claim: str | None, old: str, said: str
) -> None:
    row = PinLaterJob(7, int(IP), claim, 2, 2, status, PAST, PAST, PAST, b"b")
    with pytest.raises(ImportRefusedError, match=said) as refused:
        check_importable(row, old)
    assert "fix (or delete) the job in PinLater's database" in str(refused.value)


def test_a_long_status_is_imported_to_be_truncated() -> None:
    check_importable(
        PinLaterJob(7, int(P), None, 2, 2, "s" * 9000, PAST, PAST, PAST, b""), "q:s1:p1:7"
    )
