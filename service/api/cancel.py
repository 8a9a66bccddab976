"""cancelJobs (decision 0036): end chosen PENDING or IN_PROGRESS jobs FAILED, and the
check by which a worker's checkpoint hears that a job it runs was cancelled."""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.idl import pinlater
from pinledger.ledger import formats
from pinledger.ledger.commands import RefusalCode, Refused, decide_cancel
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Event
from pinledger.ledger.state import Job, is_cancelled
from pinledger.projections.store import QueueRow
from pinledger.service.api.barrier import settle
from pinledger.service.api.core import Api, append_by_partition, check_jobs, load_queue
from pinledger.service.api.errors import ErrorCode
from pinledger.service.api.requests import Caller, CancelRequest
from pinledger.service.observability import catalogue


def _jobs(api: Api, queue: QueueRow, jobs: Sequence[JobDescriptor]) -> dict[tuple[int, int], Job]:
    keys = list({(d.partition, d.local_id) for d in jobs})
    rows = api.store.lookup(queue.name, keys, include_body=False) if keys else []
    return {(row.partition, row.job.local_id): row.job for row in rows}


def cancel_jobs(api: Api, caller: Caller | None, request: CancelRequest) -> list[str]:
    """Cancel the request's jobs that are not finished; the descriptors (as asked) of
    those cancelled once the projection holds the cancels."""
    if api.writer.cluster_format < formats.CANCELS:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"cancelJobs needs ledger format {formats.CANCELS}; the cluster writes format "
            f"{api.writer.cluster_format}: raise it with `pinledger upgrade-format` once "
            "every server runs this release",
        )
    queue = load_queue(api, request.queue)
    check_jobs(api, queue, request.jobs)
    settle(api, queue)
    by_part: dict[int, list[Job]] = {}
    for (partition, _), selected in _jobs(api, queue, request.jobs).items():
        by_part.setdefault(partition, []).append(selected)
    events: dict[int, list[Event]] = {
        partition: list(decide_cancel(jobs, request.reason)) for partition, jobs in by_part.items()
    }
    events = {partition: evs for partition, evs in events.items() if evs}
    count = append_by_partition(api, queue, events, caller)
    if count:
        settle(api, queue)
    api.metrics.count(catalogue.JOBS_TOTAL, count, queue=queue.name, action="cancel")
    # Read back: a job that finished between the selection and the cancel is not
    # cancelled (its cancel was rejected), and one cancelled before counts as cancelled.
    now = _jobs(api, queue, request.jobs)
    return [
        str(d)
        for d in request.jobs
        if (job := now.get((d.partition, d.local_id))) is not None and is_cancelled(job)
    ]


def cancelled_among(api: Api, queue: QueueRow, jobs: Sequence[JobDescriptor]) -> list[str]:
    """The descriptors among `jobs` whose jobs were cancelled, as the projection has them
    now (a checkpoint's check: not waited for, so a cancel the projection has not reached
    yet is heard at the next checkpoint)."""
    found = _jobs(api, queue, jobs)
    return [
        str(d)
        for d in jobs
        if (job := found.get((d.partition, d.local_id))) is not None and is_cancelled(job)
    ]


def cancelled_error(descriptors: Sequence[str]) -> Exception:
    """The answer to a checkpoint that names cancelled jobs: UNKNOWN (what every PinLater
    client handles) with the descriptors in the pinledger-addition field."""
    shown = ", ".join(descriptors[:10]) + (" ..." if len(descriptors) > 10 else "")
    exc: Exception = pinlater.PinLaterException(
        errorCode=ErrorCode.UNKNOWN,
        message=f"job cancelled: {shown} (cancelJobs); stop its work and do not ack it",
        cancelledJobDescriptors=list(descriptors),
    )
    return exc
