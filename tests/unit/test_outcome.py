"""The outcome classifier against the transition table: every transition the state
machine allows has exactly one classification, and rejected events have none."""

from __future__ import annotations

import typing

import pytest

from pinledger.ledger.events import JobEvent
from pinledger.ledger.outcome import NOTHING, AttemptEnd, Classification, Outcome, classify
from pinledger.ledger.state import TRANSITIONS, JobState

S = JobState
O = Outcome  # noqa: E741
A = AttemptEnd

EVENT_TYPES: tuple[type[JobEvent], ...] = typing.get_args(JobEvent)

# (state before, event type name, state after) -> classification, for every transition
# the table allows. A new transition in the table fails test_table_is_covered until it
# is classified here.
EXPECTED: dict[tuple[JobState | None, str, JobState | None], Classification] = {
    (None, "Enqueued", S.PENDING): Classification((O.ENQUEUED,), None, False),
    (S.PENDING, "Claimed", S.IN_PROGRESS): Classification((O.CLAIMED,), None, False),
    (S.PENDING, "Deleted", None): Classification((O.DELETED,), None, False),
    (S.IN_PROGRESS, "Succeeded", S.SUCCEEDED): Classification((O.SUCCEEDED,), A.SUCCEEDED, False),
    (S.IN_PROGRESS, "Failed", S.PENDING): Classification((O.RETRIED,), A.FAILED, True),
    (S.IN_PROGRESS, "Failed", S.FAILED): Classification((O.FAILED,), A.FAILED, False),
    (S.IN_PROGRESS, "Checkpointed", S.IN_PROGRESS): Classification((O.CHECKPOINTED,), None, False),
    (S.IN_PROGRESS, "Checkpointed", S.PENDING): Classification((O.RELEASED,), A.RELEASED, True),
    (S.IN_PROGRESS, "TimedOut", S.PENDING): Classification(
        (O.TIMED_OUT, O.RETRIED), A.TIMED_OUT, True
    ),
    (S.IN_PROGRESS, "TimedOut", S.FAILED): Classification(
        (O.TIMED_OUT, O.FAILED), A.TIMED_OUT, False
    ),
    (S.IN_PROGRESS, "Deleted", None): Classification((O.DELETED,), A.DELETED, False),
    (S.SUCCEEDED, "Deleted", None): Classification((O.DELETED,), None, False),
    (S.SUCCEEDED, "Collected", None): Classification((O.COLLECTED,), None, False),
    (S.FAILED, "Retried", S.PENDING): Classification((O.RETRIED,), None, True),
    (S.FAILED, "Deleted", None): Classification((O.DELETED,), None, False),
    (S.FAILED, "Collected", None): Classification((O.COLLECTED,), None, False),
    (S.PENDING, "Cancelled", S.FAILED): Classification((O.CANCELLED,), None, False),
    (S.IN_PROGRESS, "Cancelled", S.FAILED): Classification((O.CANCELLED,), A.FAILED, False),
}

ALLOWED = [
    (before, kind, after)
    for (before, kind), afters in TRANSITIONS.items()
    for after in sorted(afters, key=lambda s: -1 if s is None else int(s))
]


def test_table_is_covered() -> None:
    allowed = {(before, kind.__name__, after) for before, kind, after in ALLOWED}
    assert allowed == set(EXPECTED)


@pytest.mark.parametrize(
    ("before", "kind", "after"),
    ALLOWED,
    ids=[f"{b and b.name}-{k.__name__}-{a and a.name}" for b, k, a in ALLOWED],
)
def test_every_allowed_transition(
    before: JobState | None, kind: type[JobEvent], after: JobState | None
) -> None:
    assert classify(kind, before, after, applied=True) == EXPECTED[(before, kind.__name__, after)]


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=[k.__name__ for k in EVENT_TYPES])
@pytest.mark.parametrize("before", [None, *JobState])
def test_a_rejected_event_has_no_outcome(kind: type[JobEvent], before: JobState | None) -> None:
    assert classify(kind, before, before, applied=False) == NOTHING


def test_an_attempt_ends_only_when_one_was_running() -> None:
    for before, kind, after in ALLOWED:
        ended = classify(kind, before, after, applied=True).attempt_end
        assert (ended is not None) <= (before == JobState.IN_PROGRESS), (before, kind, after)


def test_requeued_means_back_to_pending() -> None:
    """A job that existed and goes (back) to PENDING will run again; an enqueue is
    not a requeue."""
    for before, kind, after in ALLOWED:
        requeued = classify(kind, before, after, applied=True).requeued
        expected = before is not None and before != JobState.PENDING and after == JobState.PENDING
        assert requeued == expected, (before, kind, after)


def test_not_a_job_event() -> None:
    with pytest.raises(TypeError):
        classify(int, None, None, applied=True)  # type: ignore[arg-type]
