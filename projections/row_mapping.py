"""Rows of the named queries to the store's named rows: the column order both SQL
dialects' queries.sql return (projections/pg, projections/mysql), in one place, and
the parameters of the writes both spell alike (job_params, imported_params). What a
driver returns differently (the timeline's types) is its dialect's `timeline_row`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinledger.ledger.state import Job, JobState
from pinledger.projections.store import EventRow, HeldJob, JobRow, PartitionBatch, TimelineRow


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


def keyed(row: Sequence[Any]) -> Job:
    """A keyed_jobs row: the 13 columns of `job`, then the job's key."""
    return job(row[:13])._replace(unique_key=row[13])


def looked_up(row: Sequence[Any]) -> JobRow:
    """A lookup_jobs or find_jobs row: partition, 10 job columns without the claim
    source and touch time, the body (NULL unless asked for), then the key."""
    partition, local_id, priority, state, *rest, claim, body, unique_key = row
    found = job((local_id, priority, state, body or b"", *rest, claim, None, None))
    return JobRow(partition, found._replace(unique_key=unique_key))


def scanned(row: Sequence[Any]) -> JobRow:
    """A scan_jobs row: partition and the job's columns without its body, claim source
    and touch time."""
    partition, local_id, priority, state, *rest = row
    return JobRow(partition, job((local_id, priority, state, b"", *rest, None, None)))


def selected(row: Sequence[Any]) -> JobRow:
    """A select_jobs row: partition and the 13 job columns (an empty body)."""
    return JobRow(row[0], job(row[1:]))


def event(local_id: int, row: TimelineRow) -> EventRow:
    return EventRow(local_id, *row)


def imported_params(batch: PartitionBatch) -> list[dict[str, Any]]:
    """The imported_descriptors rows of a batch, as both adapters insert them."""
    return [
        {
            "queue": batch.queue,
            "old_descriptor": imported.old_descriptor,
            "partition": batch.partition,
            "local_id": local_id,
            "priority": imported.priority,
        }
        for local_id, imported in batch.imported.items()
    ]


def job_params(batch: PartitionBatch, job: Job) -> dict[str, Any]:
    """The parameters of upsert_job for one job of a batch."""
    return {
        "queue": batch.queue,
        "partition": batch.partition,
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
        "traceparent": batch.traceparents.get(job.local_id),
        # Written when the job is created; the upserts' updates leave it as it was.
        "unique_key": job.unique_key,
    }
