"""MariaDB rows to the store's named rows: the only place that knows column order and
the driver's types (BOOLEAN comes back as 0/1, JSON as text)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from pinledger.ledger.state import Job, JobState
from pinledger.projections.store import EventRow, HeldJob, JobRow, TimelineRow


def held(row: Sequence[Any]) -> HeldJob:
    """A job and its trace context from the 14 columns of ready_jobs and expired_claims."""
    return HeldJob(job(row[:13]), row[13])


def job(row: Sequence[Any]) -> Job:
    """A job from the 13 columns of load_jobs, partition_jobs and expired_jobs."""
    (
        local_id,
        priority,
        state,
        body,
        allowed,
        remaining,
        status,
        created_at,
        run_after,
        updated_at,
        claim,
        claim_source,
        touched_at,
    ) = row
    return Job(
        local_id=local_id,
        priority=priority,
        state=JobState(state),
        body=bytes(body),
        attempts_allowed=allowed,
        attempts_remaining=remaining,
        custom_status=status,
        created_at=created_at,
        run_after=run_after,
        updated_at=updated_at,
        claim=claim,
        claim_source=claim_source,
        touched_at=touched_at,
    )


def looked_up(row: Sequence[Any]) -> JobRow:
    """A lookup_jobs / find_jobs row: partition, 10 job columns without the claim source
    and touch time, then the body (NULL unless asked for)."""
    partition, local_id, priority, state, *rest, claim, body = row
    return JobRow(
        partition, job((local_id, priority, state, body or b"", *rest, claim, None, None))
    )


def scanned(row: Sequence[Any]) -> JobRow:
    partition, local_id, priority, state, *rest = row
    return JobRow(partition, job((local_id, priority, state, b"", *rest, None, None)))


def selected(row: Sequence[Any]) -> JobRow:
    return JobRow(row[0], job(row[1:]))


def timeline(row: Sequence[Any]) -> TimelineRow:
    values = list(row)
    values[8] = bool(values[8])  # applied
    values[12] = orjson.loads(values[12])  # detail
    return TimelineRow(*values)


def event(local_id: int, row: TimelineRow) -> EventRow:
    return EventRow(local_id, *row)


def event_params(queue: str, partition: int, row: EventRow) -> dict[str, Any]:
    return {
        "queue": queue,
        "partition": partition,
        "local_id": row.local_id,
        "offset": row.offset,
        "idx": row.idx,
        "type": row.type,
        "at": row.at,
        "source": row.source,
        "request_id": row.request_id,
        "server": row.server,
        "claim": row.claim,
        "applied": row.applied,
        "verdict": row.verdict,
        "state_after": row.state_after,
        "attempts_remaining_after": row.attempts_remaining_after,
        "detail": orjson.dumps(row.detail).decode(),
        "traceparent": row.traceparent,
    }


def job_params(queue: str, partition: int, job: Job, traceparent: str | None) -> dict[str, Any]:
    return {
        "queue": queue,
        "partition": partition,
        "local_id": job.local_id,
        "priority": job.priority,
        "state": int(job.state),
        "body": job.body,
        "attempts_allowed": job.attempts_allowed,
        "attempts_remaining": job.attempts_remaining,
        "custom_status": job.custom_status,
        "created_at": job.created_at,
        "run_after": job.run_after,
        "updated_at": job.updated_at,
        "claim": job.claim,
        "claim_source": job.claim_source,
        "touched_at": job.touched_at,
        "traceparent": traceparent,
    }
