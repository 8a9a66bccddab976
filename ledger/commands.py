"""`decide`: validate a command against what is known and return the events to append.

Deciding happens before anything is appended and may refuse (`Refused`, with a code
the Thrift edge maps to a PinLater ErrorCode). Applying happens in `state.evolve`,
after the log has the events, and never refuses. Commands that act on jobs an owner
holds in memory (claims, timeouts, GC, admin retry and delete) select jobs here with
the same rules `evolve` enforces, so what is appended normally applies.

`now` is passed in: this module never reads a clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from pinledger.ledger.descriptor import MAX_QUEUE_NAME_LENGTH, QUEUE_NAME_RE
from pinledger.ledger.events import (
    Cancelled,
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Failed,
    Retried,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.limits import MAX_RETRY_DELAY_MS, shown
from pinledger.ledger.state import FINISHED, MAX_CUSTOM_STATUS, Job, JobState, cap_status


class RefusalCode(Enum):
    QUEUE_NAME_INVALID = "QUEUE_NAME_INVALID"
    QUEUE_NAME_TOO_LONG = "QUEUE_NAME_TOO_LONG"
    PRIORITY_NOT_SUPPORTED = "PRIORITY_NOT_SUPPORTED"
    ENQUEUE_REJECTED = "ENQUEUE_REJECTED"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    PASSWORD_INVALID = "PASSWORD_INVALID"


class Refused(Exception):  # noqa: N818 - a decision, not an error of the program
    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Limits:
    max_priority: int = 3
    # PinLater stored bodies in MySQL BLOB/Redis values; ours is a documented cap that
    # keeps one job well inside a Kafka record (message.max.bytes defaults to 1 MiB).
    max_body_bytes: int = 512 * 1024


@dataclass(frozen=True, slots=True)
class NewJob:
    body: bytes
    priority: int = 1
    run_after: int | None = None
    attempts_allowed: int = 2
    custom_status: str = ""
    # A unique job's key (decision 0037), and how long it stays taken after the job
    # finished when not the queue's uniqueForSeconds (a periodic job's tick: 0038).
    unique_key: str | None = None
    unique_for_ms: int | None = None


def check_queue_name(name: str, what: str = "queue name") -> None:
    """A queue name is a Kafka topic's: ASCII letters, digits and '_' (Kafka would also
    take '.' and '-'; PinLater's `\\w` did not), at most MAX_QUEUE_NAME_LENGTH."""
    if not name or not QUEUE_NAME_RE.fullmatch(name):
        raise Refused(
            RefusalCode.QUEUE_NAME_INVALID,
            f"{what} {shown(name)} is invalid: use ASCII letters, digits and '_' only",
        )
    if len(name) > MAX_QUEUE_NAME_LENGTH:
        raise Refused(
            RefusalCode.QUEUE_NAME_TOO_LONG,
            f"{what} is {len(name)} characters, the limit is {MAX_QUEUE_NAME_LENGTH}",
        )


def check_priority(priority: int, limits: Limits) -> None:
    if not 1 <= priority <= limits.max_priority:
        raise Refused(
            RefusalCode.PRIORITY_NOT_SUPPORTED,
            f"priority {priority} is not supported: use 1 (highest) to {limits.max_priority}",
        )


# Upper bounds of the jobs one call may ask for: a dequeue or a scan answers in one
# Thrift frame, and 102,000 jobs in one dry-run answer was a frame of hundreds of MB.
# Bulk retry and delete append in batches and have no bound.
MAX_DEQUEUE_LIMIT = 1000
MAX_SCAN_LIMIT = 1000


def check_limit(limit: int, what: str = "limit", maximum: int | None = None) -> None:
    if limit < 0:
        raise Refused(RefusalCode.INVALID_ARGUMENT, f"{what} must not be negative, got {limit}")
    if maximum is not None and limit > maximum:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"{what} {limit} is over the maximum of {maximum}: ask in several calls",
        )


def _check_attempts(attempts: int, what: str) -> None:
    if attempts < 1:
        raise Refused(RefusalCode.INVALID_ARGUMENT, f"{what} must be at least 1, got {attempts}")


def decide_enqueue(
    jobs: Sequence[NewJob], now: int, limits: Limits, unique_for_ms: int = 0
) -> list[Enqueued]:
    """All or nothing: one invalid job refuses the whole request, so the caller never
    has to work out which of its jobs were taken. A keyed job's enqueue carries the
    queue's `unique_for_ms` (uniqueForSeconds), so the fold never reads a setting."""
    events = []
    for position, job in enumerate(jobs):
        check_priority(job.priority, limits)
        _check_attempts(job.attempts_allowed, f"job {position}: numAttemptsAllowed")
        if len(job.body) > limits.max_body_bytes:
            raise Refused(
                RefusalCode.ENQUEUE_REJECTED,
                f"job {position}: body is {len(job.body)} bytes, the limit is "
                f"{limits.max_body_bytes}",
            )
        events.append(
            Enqueued(
                body=job.body,
                priority=job.priority,
                run_after=now if job.run_after is None else job.run_after,
                attempts_allowed=job.attempts_allowed,
                custom_status=cap_status(job.custom_status),
                unique_key=job.unique_key,
                unique_for_ms=(
                    0
                    if job.unique_key is None
                    else unique_for_ms
                    if job.unique_for_ms is None
                    else job.unique_for_ms
                ),
            )
        )
    return events


def is_due(job: Job, now: int) -> bool:
    return job.state is JobState.PENDING and job.run_after <= now


def decide_claims(candidates: Iterable[Job], claim: str, now: int, limit: int) -> list[Claimed]:
    """Claim up to `limit` due jobs, in the order the dispatcher offers them."""
    claims: list[Claimed] = []
    for job in candidates:
        if len(claims) >= limit:
            break
        if is_due(job, now):
            claims.append(Claimed(local_id=job.local_id, claim=claim))
    return claims


def decide_success(local_id: int, append_status: str, claim: str | None = None) -> Succeeded:
    return Succeeded(
        local_id=local_id, append_status=append_status[:MAX_CUSTOM_STATUS], claim=claim
    )


def decide_failure(
    local_id: int, retry_delay_ms: int, append_status: str, claim: str | None = None
) -> Failed:
    if retry_delay_ms < 0:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"retryDelayMillis must not be negative, got {retry_delay_ms}",
        )
    if retry_delay_ms > MAX_RETRY_DELAY_MS:
        # The job's run_after (now + delay) must stay a bigint, or no store can hold it.
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"retryDelayMillis {retry_delay_ms} is over the maximum of {MAX_RETRY_DELAY_MS} "
            "(a century)",
        )
    return Failed(
        local_id=local_id,
        retry_delay_ms=retry_delay_ms,
        append_status=append_status[:MAX_CUSTOM_STATUS],
        claim=claim,
    )


def decide_checkpoint(event: Checkpointed, limits: Limits) -> Checkpointed:
    """The checkpoint as appended: a prepended status is cut to MAX_CUSTOM_STATUS (the
    job keeps no more of it: `cap_status` keeps the start of prepend + status)."""
    if event.prepend_status is not None and len(event.prepend_status) > MAX_CUSTOM_STATUS:
        event = dataclasses.replace(event, prepend_status=cap_status(event.prepend_status))
    if event.attempts_allowed is not None:
        _check_attempts(event.attempts_allowed, "numOfAttemptsAllowed")
    if event.new_body is not None and len(event.new_body) > limits.max_body_bytes:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"checkpoint newBody is {len(event.new_body)} bytes, the limit is "
            f"{limits.max_body_bytes}",
        )
    return event


def decide_timeouts(jobs: Iterable[Job], now: int, claim_timeout_ms: int) -> list[TimedOut]:
    """Claims not renewed within the timeout become TimedOut events."""
    return [
        TimedOut(local_id=job.local_id, claim=job.claim, touched_at=job.touched_at)
        for job in jobs
        if job.state is JobState.IN_PROGRESS
        and job.claim is not None
        and job.touched_at is not None
        and job.touched_at + claim_timeout_ms <= now
    ]


def decide_collect(
    jobs: Iterable[Job], now: int, succeeded_ttl_ms: int, failed_ttl_ms: int
) -> list[Collected]:
    """Finished jobs whose TTL (from their last update) has passed."""
    ttl = {JobState.SUCCEEDED: succeeded_ttl_ms, JobState.FAILED: failed_ttl_ms}
    return [
        Collected(local_id=job.local_id)
        for job in jobs
        if job.state in ttl and job.updated_at + ttl[job.state] <= now
    ]


def decide_retry(
    jobs: Iterable[Job], attempts: int, run_after: int | None, now: int, limit: int
) -> list[Retried]:
    """retryFailedJobs: FAILED jobs back to PENDING with `attempts` attempts."""
    _check_attempts(attempts, "attemptsToAllow")
    check_limit(limit)
    when = now if run_after is None else run_after
    failed = (job for job in jobs if job.state is JobState.FAILED)
    return [
        Retried(local_id=job.local_id, attempts_allowed=attempts, run_after=when)
        for job, _ in zip(failed, range(limit), strict=False)
    ]


def decide_delete(
    jobs: Iterable[Job], state: JobState, limit: int, guarded: bool = True
) -> list[Deleted]:
    """deleteJobs: up to `limit` jobs in `state`. `guarded` (ledger format 3 and
    later): each delete names the state it was selected in, and applies only while the
    job is still in it (a retry, claim or ack may land between the selection and the
    delete); unguarded, for a cluster at an older format, whose servers could not read
    the guard."""
    check_limit(limit)
    matching = (job for job in jobs if job.state is state)
    guard = int(state) if guarded else None
    return [
        Deleted(local_id=job.local_id, state=guard)
        for job, _ in zip(matching, range(limit), strict=False)
    ]


def decide_cancel(jobs: Iterable[Job], reason: str) -> list[Cancelled]:
    """cancelJobs (decision 0036): the jobs among `jobs` that are not finished (PENDING
    or IN_PROGRESS), each ended FAILED with `reason`; a finished job is left as it is
    (`evolve` would reject its cancel)."""
    return [
        Cancelled(local_id=job.local_id, reason=cap_status(reason))
        for job in jobs
        if job.state not in FINISHED
    ]
