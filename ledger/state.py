"""The job state machine: the one place where a job's state changes.

`evolve(job, event, stamp)` is total and pure. The log cannot refuse what it already
holds, so an event that does not apply (a stale ack, a second claim, a timeout that a
heartbeat overtook) leaves the job unchanged and comes back with a rejected `Verdict`
saying why; the projection records that verdict in the job's trace.

States (PinLater's PinLaterJobState, same numbers):

- PENDING: waiting for `run_after`. In by Enqueued, Failed with attempts left,
  TimedOut with attempts left, Checkpointed(move_to_pending), Retried. Out by Claimed.
- IN_PROGRESS: claimed by one dequeue call, the only state with a claim. In by
  Claimed. Out by Succeeded, Failed, TimedOut, Checkpointed(move_to_pending).
- SUCCEEDED: done. In by Succeeded. Out only by Deleted or Collected.
- FAILED: attempts exhausted. In by Failed or TimedOut on the last attempt. Out by
  Retried (operator), Deleted, Collected.

Cancelled (ledger format 3) ends a PENDING or IN_PROGRESS job FAILED with no attempts
left and a custom status that starts with `CANCELLED_PREFIX` (who, and why); a finished
job is not cancelled.

Deleted removes a job in any state, or (ledger format 3) only in the state it was
selected in; Collected removes a finished one. A removed job is
`None`; its history stays in the log and in the job_events projection.

Ack fencing (a fix of PinLater, which let a timed-out worker overwrite a newer
attempt): an ack or checkpoint applies only to an IN_PROGRESS job, and only under the
claim it names, or, since PinLater acks carry no claim, only when it comes from the
same `RequestContext.source` as the claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from pinledger.ledger import limits
from pinledger.ledger.descriptor import local_id_for
from pinledger.ledger.events import (
    Actor,
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

# PinLater truncated custom status at 5000 characters rather than refusing it (the
# limits of every string a request carries: ledger/limits.py).
MAX_CUSTOM_STATUS = limits.MAX_CUSTOM_STATUS


class JobState(IntEnum):
    PENDING = 0
    IN_PROGRESS = 1
    SUCCEEDED = 2
    FAILED = 3


FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED})

# The transition table: for each (state before, event type), the states `evolve` may
# produce when it applies the event; None is "no job" (not yet enqueued, or removed). A
# pair that is not listed never applies: the event is rejected and the job is unchanged.
# `evolve` below is the implementation; tests/unit/test_state.py checks it against this
# table and tests/unit/test_state_machine_doc.py checks docs/state_machine.md against it.
TRANSITIONS: dict[tuple[JobState | None, type], frozenset[JobState | None]] = {
    (None, Enqueued): frozenset({JobState.PENDING}),
    (JobState.PENDING, Claimed): frozenset({JobState.IN_PROGRESS}),
    (JobState.PENDING, Deleted): frozenset({None}),
    (JobState.IN_PROGRESS, Succeeded): frozenset({JobState.SUCCEEDED}),
    # Attempts left: back to PENDING; last attempt: FAILED.
    (JobState.IN_PROGRESS, Failed): frozenset({JobState.PENDING, JobState.FAILED}),
    # A heartbeat stays IN_PROGRESS; move_to_pending goes back to PENDING.
    (JobState.IN_PROGRESS, Checkpointed): frozenset({JobState.IN_PROGRESS, JobState.PENDING}),
    (JobState.IN_PROGRESS, TimedOut): frozenset({JobState.PENDING, JobState.FAILED}),
    (JobState.IN_PROGRESS, Deleted): frozenset({None}),
    (JobState.SUCCEEDED, Deleted): frozenset({None}),
    (JobState.SUCCEEDED, Collected): frozenset({None}),
    (JobState.FAILED, Retried): frozenset({JobState.PENDING}),
    (JobState.FAILED, Deleted): frozenset({None}),
    (JobState.FAILED, Collected): frozenset({None}),
    # cancelJobs (decision 0036): a job not yet finished ends FAILED, no attempts left.
    (JobState.PENDING, Cancelled): frozenset({JobState.FAILED}),
    (JobState.IN_PROGRESS, Cancelled): frozenset({JobState.FAILED}),
}


class Job(NamedTuple):
    """A job as the ledger folds it. A named tuple, not a frozen dataclass: as immutable,
    and built at a third of the cost (`_replace` included), which is most of what a
    fold spends per event (docs/performance-history.md, "The fold's objects and the owner's
    metrics"; decision 0023)."""

    local_id: int
    priority: int
    state: JobState
    body: bytes
    attempts_allowed: int
    attempts_remaining: int
    custom_status: str
    created_at: int
    run_after: int
    updated_at: int
    claim: str | None = None
    claim_source: str | None = None
    # When the claim was taken or last renewed by a heartbeat; the claim timeout runs
    # from here.
    touched_at: int | None = None
    # A unique job's key (decision 0037); None for a job enqueued without one.
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class Stamp:
    """What the envelope says about an event: when, and who."""

    at: int
    actor: Actor


@dataclass(frozen=True, slots=True)
class Verdict:
    applied: bool
    reason: str = ""

    def __str__(self) -> str:
        return "applied" if self.applied else f"rejected: {self.reason}"


APPLIED = Verdict(True)


def _rejected(reason: str) -> Verdict:
    return Verdict(False, reason)


def cap_status(status: str) -> str:
    return status[:MAX_CUSTOM_STATUS]


def _fence(job: Job | None, claim: str | None, stamp: Stamp, what: str) -> Verdict:
    """Whether an ack or checkpoint may act on the job's current attempt."""
    if job is None:
        return _rejected(f"{what}: no such job")
    if job.state is not JobState.IN_PROGRESS:
        return _rejected(f"{what}: job is {job.state.name}, not IN_PROGRESS")
    if claim is not None and claim != job.claim:
        return _rejected(f"{what}: stale claim {claim}, job is claimed by {job.claim}")
    if claim is None and stamp.actor.source != job.claim_source:
        return _rejected(
            f"{what}: from {stamp.actor.source!r}, but job is claimed by "
            f"{job.claim_source!r} under {job.claim}"
        )
    return APPLIED


def _release(job: Job, stamp: Stamp, run_after: int, status: str) -> Job:
    """One attempt used: back to PENDING while attempts remain, else FAILED."""
    if job.attempts_remaining > 1:
        state, remaining = JobState.PENDING, job.attempts_remaining - 1
    else:
        state, remaining, run_after = JobState.FAILED, 0, job.run_after
    return job._replace(
        state=state,
        attempts_remaining=remaining,
        run_after=run_after,
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=stamp.at,
        custom_status=status,
    )


def holds_key(job: Job, unique_for_ms: int, at: int) -> bool:
    """Whether `job` keeps an enqueue of its key at `at` from creating a job: while it
    is unfinished, and (when the enqueue asks for it) until `unique_for_ms` after it
    finished. A finished job's `updated_at` is when it finished: nothing changes a
    finished job but a retry, which makes it unfinished again."""
    if job.state not in FINISHED:
        return True
    return at < job.updated_at + unique_for_ms


def key_holder(event: Enqueued, stamp: Stamp, keyed: Iterable[Job | None]) -> Job | None:
    """The job that turns the keyed enqueue `event` away, among `keyed` (the partition's
    jobs with its key, None for a removed one), or None when it creates its job. An
    unfinished holder is preferred to a finished one, then the newest: the job a caller
    would want to hear of."""
    holders = [
        job
        for job in keyed
        if job is not None and holds_key(job, max(event.unique_for_ms, 0), stamp.at)
    ]
    if not holders:
        return None
    return max(holders, key=lambda job: (job.state not in FINISHED, job.local_id))


def _enqueued(
    job: Job | None, event: Enqueued, stamp: Stamp, local_id: int, held_by: Job | None
) -> tuple[Job | None, Verdict]:
    if job is not None:
        return job, _rejected("enqueue: a job with this id exists already")
    if held_by is not None:
        # Recorded, not refused: the log holds the enqueue, the fold decides it makes
        # no job, identically in every replay (one owner per partition, log order).
        return None, _rejected(
            f"enqueue: key {event.unique_key!r} is held by job {held_by.local_id} "
            f"({held_by.state.name})"
        )
    attempts = max(event.attempts_allowed, 0)
    return Job(
        local_id=local_id,
        priority=event.priority,
        state=JobState.PENDING,
        body=event.body,
        attempts_allowed=attempts,
        attempts_remaining=attempts,
        custom_status=cap_status(event.custom_status),
        created_at=stamp.at,
        run_after=event.run_after,
        updated_at=stamp.at,
        unique_key=event.unique_key,
    ), APPLIED


def _claimed(job: Job | None, event: Claimed, stamp: Stamp) -> tuple[Job | None, Verdict]:
    if job is None:
        return None, _rejected("claim: no such job")
    if job.state is JobState.IN_PROGRESS:
        # Log order arbitrates between two owners: the first claim in the log wins.
        return job, _rejected(f"claim: job is already claimed by {job.claim}")
    if job.state is not JobState.PENDING:
        return job, _rejected(f"claim: job is {job.state.name}, not PENDING")
    if job.run_after > stamp.at:
        return job, _rejected("claim: job is not due yet")
    return job._replace(
        state=JobState.IN_PROGRESS,
        claim=event.claim,
        claim_source=stamp.actor.source,
        touched_at=stamp.at,
        updated_at=stamp.at,
    ), APPLIED


def _succeeded(job: Job | None, event: Succeeded, stamp: Stamp) -> tuple[Job | None, Verdict]:
    verdict = _fence(job, event.claim, stamp, "success ack")
    if job is None or not verdict.applied:
        return job, verdict
    return job._replace(
        state=JobState.SUCCEEDED,
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=stamp.at,
        custom_status=cap_status(job.custom_status + event.append_status),
    ), APPLIED


def _failed(job: Job | None, event: Failed, stamp: Stamp) -> tuple[Job | None, Verdict]:
    verdict = _fence(job, event.claim, stamp, "failure ack")
    if job is None or not verdict.applied:
        return job, verdict
    status = cap_status(job.custom_status + event.append_status)
    return _release(job, stamp, stamp.at + max(event.retry_delay_ms, 0), status), APPLIED


def _checkpointed(job: Job | None, event: Checkpointed, stamp: Stamp) -> tuple[Job | None, Verdict]:
    verdict = _fence(job, event.claim, stamp, "checkpoint")
    if job is None or not verdict.applied:
        return job, verdict
    updated = job._replace(updated_at=stamp.at)
    if event.new_body is not None:
        updated = updated._replace(body=event.new_body)
    if event.attempts_allowed is not None:
        attempts = max(event.attempts_allowed, 0)
        updated = updated._replace(attempts_allowed=attempts, attempts_remaining=attempts)
    if event.prepend_status:
        updated = updated._replace(
            custom_status=cap_status(event.prepend_status + updated.custom_status)
        )
    if event.move_to_pending:
        run_after = stamp.at if event.run_after is None else event.run_after
        return updated._replace(
            state=JobState.PENDING,
            claim=None,
            claim_source=None,
            touched_at=None,
            run_after=run_after,
        ), APPLIED
    return updated._replace(touched_at=stamp.at), APPLIED


def _timed_out(job: Job | None, event: TimedOut, stamp: Stamp) -> tuple[Job | None, Verdict]:
    if job is None:
        return None, _rejected("timeout: no such job")
    if job.state is not JobState.IN_PROGRESS or job.claim != event.claim:
        return job, _rejected(f"timeout: claim {event.claim} is no longer current")
    if job.touched_at != event.touched_at:
        return job, _rejected("timeout: a heartbeat renewed the claim")
    return _release(job, stamp, stamp.at, job.custom_status), APPLIED


def _retried(job: Job | None, event: Retried, stamp: Stamp) -> tuple[Job | None, Verdict]:
    if job is None:
        return None, _rejected("retry: no such job")
    if job.state is not JobState.FAILED:
        return job, _rejected(f"retry: job is {job.state.name}, not FAILED")
    attempts = max(event.attempts_allowed, 0)
    return job._replace(
        state=JobState.PENDING,
        attempts_allowed=attempts,
        attempts_remaining=attempts,
        run_after=event.run_after,
        updated_at=stamp.at,
    ), APPLIED


def _deleted(job: Job | None, event: Deleted) -> tuple[Job | None, Verdict]:
    if job is None:
        return None, _rejected("delete: no such job")
    if event.state is not None and job.state != event.state:
        # Selected in one state, changed since (a retry, a claim, an ack): not the job
        # the operator chose to delete.
        return job, _rejected(
            f"delete: job is {job.state.name}, not {_state_name(event.state)} as selected"
        )
    return None, APPLIED


# A cancelled job's custom status starts with this, then the canceller's source and the
# reason: how a checkpoint of the job is told it was cancelled (service/api/acks.py).
CANCELLED_PREFIX = "cancelled by "


def cancelled_status(source: str, reason: str) -> str:
    """The status a cancel prepends: "cancelled by <source>: <reason>"."""
    said = f"{CANCELLED_PREFIX}{source or 'unknown'}"
    return f"{said}: {reason}" if reason else said


def is_cancelled(job: Job) -> bool:
    """Whether the job ended by a cancel (FAILED with a cancel's status). A status a
    caller wrote alike can only be a FAILED job's, which no checkpoint applies to."""
    return job.state is JobState.FAILED and job.custom_status.startswith(CANCELLED_PREFIX)


def _cancelled(job: Job | None, event: Cancelled, stamp: Stamp) -> tuple[Job | None, Verdict]:
    if job is None:
        return None, _rejected("cancel: no such job")
    if job.state in FINISHED:
        return job, _rejected(f"cancel: job is {job.state.name}, finished already")
    said = cancelled_status(stamp.actor.source, event.reason)
    # Prepended and set apart, so the cap keeps the cancel and cuts the old status.
    status = f"{said}; {job.custom_status}" if job.custom_status else said
    return job._replace(
        state=JobState.FAILED,
        attempts_remaining=0,
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=stamp.at,
        custom_status=cap_status(status),
    ), APPLIED


def _state_name(state: int) -> str:
    try:
        return JobState(state).name
    except ValueError:
        return f"state {state}"


def _collected(job: Job | None) -> tuple[Job | None, Verdict]:
    if job is None:
        return None, _rejected("gc: no such job")
    if job.state not in FINISHED:
        return job, _rejected(f"gc: job is {job.state.name}, not finished")
    return None, APPLIED


def evolve(
    job: Job | None,
    event: JobEvent,
    stamp: Stamp,
    local_id: int | None = None,
    held_by: Job | None = None,
) -> tuple[Job | None, Verdict]:
    """Apply one event to one job (None: no such job). `local_id` names the job an
    Enqueued event creates (it comes from the record's offset); other events carry it.
    `held_by` is the job holding a keyed Enqueued's key (`key_holder`, which sees the
    partition's jobs of that key): the enqueue then creates nothing.
    """
    match event:
        case Enqueued():
            if local_id is None:
                raise ValueError("evolve(Enqueued) needs the local_id derived from the offset")
            return _enqueued(job, event, stamp, local_id, held_by)
        case Claimed():
            return _claimed(job, event, stamp)
        case Succeeded():
            return _succeeded(job, event, stamp)
        case Failed():
            return _failed(job, event, stamp)
        case Checkpointed():
            return _checkpointed(job, event, stamp)
        case TimedOut():
            return _timed_out(job, event, stamp)
        case Retried():
            return _retried(job, event, stamp)
        case Deleted():
            return _deleted(job, event)
        case Collected():
            return _collected(job)
        case Cancelled():
            return _cancelled(job, event, stamp)


def event_local_id(event: JobEvent, offset: int, index: int) -> int:
    """The job an event concerns; for Enqueued it is derived from where the record sits."""
    if isinstance(event, Enqueued):
        return local_id_for(offset, index)
    return event.local_id
