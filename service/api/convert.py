"""Our values as PinLater response structs: the one place (with history.py) that
builds thriftpy2 structs, so `Any` stays at this edge."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pinledger.idl import pinlater
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.projections.store import JobRow
from pinledger.service.api.core import DequeuedJob


def descriptor_of(queue: str, row: JobRow) -> str:
    job = row.job
    return str(JobDescriptor(queue, row.partition, job.priority, job.local_id))


def job_info(queue: str, row: JobRow, include_body: bool, descriptor: str | None = None) -> Any:
    """A PinLaterJobInfo, under `descriptor` when given (the one a lookup asked for)."""
    job = row.job
    return pinlater.PinLaterJobInfo(
        jobDescriptor=descriptor if descriptor is not None else descriptor_of(queue, row),
        jobState=int(job.state),
        attemptsAllowed=job.attempts_allowed,
        attemptsRemaining=job.attempts_remaining,
        customStatus=job.custom_status,
        createdAtTimestampMillis=job.created_at,
        runAfterTimestampMillis=job.run_after,
        updatedAtTimestampMillis=job.updated_at,
        claimDescriptor=job.claim,
        body=job.body if include_body else None,
        uniqueKey=job.unique_key,
    )


def enqueue_response(descriptors: Iterable[JobDescriptor]) -> Any:
    return pinlater.PinLaterEnqueueResponse(jobDescriptors=[str(d) for d in descriptors])


def dequeue_response(claimed: Sequence[DequeuedJob], queue: str) -> Any:
    jobs, metadata, traceparents = {}, {}, {}
    for item in claimed:
        key = str(JobDescriptor(queue, item.partition, item.job.priority, item.job.local_id))
        jobs[key] = item.job.body
        metadata[key] = pinlater.PinLaterDequeueMetadata(
            attemptsAllowed=item.job.attempts_allowed,
            attemptsRemaining=item.job.attempts_remaining,
        )
        if item.traceparent:
            traceparents[key] = item.traceparent
    return pinlater.PinLaterDequeueResponse(
        jobs=jobs, jobMetadata=metadata, jobTraceparents=traceparents or None
    )


def merge_dequeued(response: Any, more: Any) -> None:
    """Add a peer's dequeue response to ours."""
    response.jobs.update(more.jobs or {})
    response.jobMetadata.update(more.jobMetadata or {})
    if more.jobTraceparents:
        response.jobTraceparents = {**(response.jobTraceparents or {}), **more.jobTraceparents}


def dequeued_count(response: Any) -> int:
    return len(response.jobs)


def scan_response(queue: str, page: Sequence[JobRow], continuation: str) -> Any:
    return pinlater.PinLaterScanJobsResponse(
        scannedJobs=[job_info(queue, row, False) for row in page], continuation=continuation
    )
