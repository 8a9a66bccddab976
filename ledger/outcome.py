"""The one outcome classifier: what an applied transition did to a job.

Every consumer of transitions that needs words for them (the ledger metrics, a job's
history and its attempts, the worker's counters) asks `classify`, so a failure that
sends a job back to PENDING is "retried" everywhere, and an attempt ended by a
timeout is "timed_out" everywhere. It is defined over the transition table of
ledger/state.py: tests/unit/test_outcome.py checks that every (state, event, state
after) the table allows has exactly one classification.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pinledger.ledger.events import (
    Cancelled,
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Failed,
    JobEvent,
    Retried,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.state import JobState


class Outcome(StrEnum):
    """What an applied event did to the job (a timeout is two: timed_out, then retried
    or failed)."""

    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    SUCCEEDED = "succeeded"
    # The job ended FAILED: a failure or a timeout on its last attempt.
    FAILED = "failed"
    # Back to PENDING after a failure or a timeout with attempts left, or by
    # retryFailedJobs.
    RETRIED = "retried"
    TIMED_OUT = "timed_out"
    # A heartbeat: the attempt goes on.
    CHECKPOINTED = "checkpointed"
    # A checkpoint that moved the job back to PENDING (chained and cron-like jobs).
    RELEASED = "released"
    DELETED = "deleted"
    COLLECTED = "collected"
    # Ended FAILED by an operator's cancelJobs (decision 0036).
    CANCELLED = "cancelled"


class AttemptEnd(StrEnum):
    """How an applied event ended the running attempt."""

    SUCCEEDED = "succeeded"
    # The attempt failed; `Classification.requeued` says whether the job will run again.
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    RELEASED = "released"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Classification:
    outcomes: tuple[Outcome, ...]
    # Set when the event ended an attempt that was running (the job was IN_PROGRESS).
    attempt_end: AttemptEnd | None
    # The job went (back) to PENDING: it will be claimed again.
    requeued: bool


NOTHING = Classification((), None, False)


def classify(
    kind: type[JobEvent], before: JobState | None, after: JobState | None, applied: bool
) -> Classification:
    """The classification of one transition; NOTHING when the event was rejected."""
    if not applied:
        return NOTHING
    running = before == JobState.IN_PROGRESS
    requeued = before is not None and before != JobState.PENDING and after == JobState.PENDING
    ended_failed = after == JobState.FAILED
    if kind is Enqueued:
        return Classification((Outcome.ENQUEUED,), None, False)
    if kind is Claimed:
        return Classification((Outcome.CLAIMED,), None, False)
    if kind is Succeeded:
        return Classification((Outcome.SUCCEEDED,), AttemptEnd.SUCCEEDED, False)
    if kind is Failed:
        verdict = Outcome.FAILED if ended_failed else Outcome.RETRIED
        return Classification((verdict,), AttemptEnd.FAILED, requeued)
    if kind is TimedOut:
        verdict = Outcome.FAILED if ended_failed else Outcome.RETRIED
        return Classification((Outcome.TIMED_OUT, verdict), AttemptEnd.TIMED_OUT, requeued)
    if kind is Checkpointed:
        if requeued:
            return Classification((Outcome.RELEASED,), AttemptEnd.RELEASED, True)
        return Classification((Outcome.CHECKPOINTED,), None, False)
    if kind is Retried:
        return Classification((Outcome.RETRIED,), None, True)
    if kind is Deleted:
        return Classification((Outcome.DELETED,), AttemptEnd.DELETED if running else None, False)
    if kind is Collected:
        return Classification((Outcome.COLLECTED,), None, False)
    if kind is Cancelled:
        # A running attempt ends failed, for good (no attempts left).
        return Classification((Outcome.CANCELLED,), AttemptEnd.FAILED if running else None, False)
    raise TypeError(f"not a job event type: {kind!r}")
