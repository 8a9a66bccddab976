"""ackDequeuedJobs and checkpointJobs: the worker's word on jobs it holds, decided
per job and appended per partition."""

from __future__ import annotations

from pinledger.ledger.commands import decide_checkpoint, decide_failure, decide_success
from pinledger.ledger.events import Checkpointed, Event
from pinledger.projections.store import QueueRow
from pinledger.service.api.cancel import cancelled_among, cancelled_error
from pinledger.service.api.core import Api, append_by_partition, check_jobs, load_queue
from pinledger.service.api.requests import AckRequest, Caller, CheckpointRequest
from pinledger.service.observability import catalogue


def apply_acks(api: Api, caller: Caller | None, request: AckRequest, queue: QueueRow) -> None:
    """Append the acks of `request` (and count them)."""
    append_by_partition(api, queue, ack_events(api, queue, request), caller)
    count_acks(api, request, queue)


def ack_events(api: Api, queue: QueueRow, request: AckRequest) -> dict[int, list[Event]]:
    """The events of `request`'s acks, per partition; DescriptorError for a job that is
    not the queue's."""
    check_jobs(api, queue, [info.job for info in (*request.succeeded, *request.failed)])
    events: dict[int, list[Event]] = {}
    for info in request.succeeded:
        events.setdefault(info.job.partition, []).append(
            decide_success(info.job.local_id, info.append_status)
        )
    for info in request.failed:
        events.setdefault(info.job.partition, []).append(
            decide_failure(info.job.local_id, info.retry_delay_ms, info.append_status)
        )
    return events


def count_acks(api: Api, request: AckRequest, queue: QueueRow) -> None:
    """Once the acks are in the log."""
    api.metrics.count(
        catalogue.JOBS_TOTAL, len(request.succeeded), queue=queue.name, action="ack_success"
    )
    api.metrics.count(
        catalogue.JOBS_TOTAL, len(request.failed), queue=queue.name, action="ack_failure"
    )


def ack_dequeued_jobs(api: Api, caller: Caller | None, request: AckRequest) -> None:
    apply_acks(api, caller, request, load_queue(api, request.queue))


def checkpoint_jobs(api: Api, caller: Caller | None, request: CheckpointRequest) -> None:
    queue = load_queue(api, request.queue)
    check_jobs(api, queue, (item.job for item in request.checkpoints))
    # A cancelled job's checkpoint would be rejected in the fold, unheard: the worker is
    # told instead (decision 0036), after the other jobs' checkpoints are appended.
    cancelled = set(cancelled_among(api, queue, [item.job for item in request.checkpoints]))
    events: dict[int, list[Event]] = {}
    for item in request.checkpoints:
        if str(item.job) in cancelled:
            continue
        event = Checkpointed(
            local_id=item.job.local_id,
            new_body=item.new_body,
            move_to_pending=item.move_to_pending,
            run_after=item.run_after,
            attempts_allowed=item.attempts_allowed,
            prepend_status=item.prepend_status,
        )
        events.setdefault(item.job.partition, []).append(decide_checkpoint(event, api.limits))
    append_by_partition(api, queue, events, caller)
    api.metrics.count(
        catalogue.JOBS_TOTAL,
        len(request.checkpoints) - len(cancelled),
        queue=queue.name,
        action="checkpoint",
    )
    if cancelled:
        raise cancelled_error(sorted(cancelled))
