"""retryFailedJobs and deleteJobs: bulk actions on the jobs a filter selects (and the
dashboard's retry and delete of chosen jobs), decided
against the projected rows and appended per partition in chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pinledger.ledger import formats
from pinledger.ledger.commands import decide_delete, decide_retry
from pinledger.ledger.events import Event
from pinledger.ledger.state import Job, JobState
from pinledger.projections.store import JobRow, QueueRow
from pinledger.service.api.barrier import settle
from pinledger.service.api.core import Api, append_by_partition, load_queue
from pinledger.service.api.reads import job_filter
from pinledger.service.api.requests import Caller, DeleteJobsRequest, RetryRequest
from pinledger.service.observability import catalogue


def _append_bulk(
    api: Api,
    queue: QueueRow,
    rows: Sequence[JobRow],
    decide: Callable[[list[Job]], list[Event]],
    caller: Caller | None,
) -> int:
    by_part: dict[int, list[Job]] = {}
    for row in rows:
        by_part.setdefault(row.partition, []).append(row.job)
    events = {partition: decide(jobs) for partition, jobs in by_part.items()}
    count = append_by_partition(api, queue, events, caller)
    if count:
        settle(api, queue)
    return count


def _guarded(api: Api) -> bool:
    """Whether deletes name the state they were selected in: only once every server
    reads it (ledger format 3)."""
    return api.writer.cluster_format >= formats.GUARDED_DELETES


def retry_failed_jobs(api: Api, caller: Caller | None, request: RetryRequest) -> int:
    queue = load_queue(api, request.queue)
    where = job_filter(api, queue, JobState.FAILED, request.priority, None)
    settle(api, queue)
    rows = api.store.select(where, request.limit)
    now = api.clock.now_ms()
    count = _append_bulk(
        api,
        queue,
        rows,
        lambda jobs: list(decide_retry(jobs, request.attempts, request.run_after, now, len(jobs))),
        caller,
    )
    api.metrics.count(catalogue.JOBS_TOTAL, count, queue=queue.name, action="retry")
    return count


def delete_jobs(api: Api, caller: Caller | None, request: DeleteJobsRequest) -> int:
    queue = load_queue(api, request.queue)
    where = job_filter(api, queue, request.state, request.priority, request.body_regex)
    settle(api, queue)
    rows = api.store.select(where, request.limit)
    guarded = _guarded(api)
    count = _append_bulk(
        api,
        queue,
        rows,
        lambda jobs: list(decide_delete(jobs, where.state, len(jobs), guarded)),
        caller,
    )
    api.metrics.count(catalogue.JOBS_TOTAL, count, queue=queue.name, action="delete")
    return count


def retry_selected(
    api: Api, caller: Caller | None, queue_name: str, keys: Sequence[tuple[int, int]], attempts: int
) -> int:
    """The dashboard's retry of chosen jobs, by (partition, local_id): the FAILED ones
    among them back to PENDING with `attempts` attempts, decided and appended as
    retryFailedJobs does."""
    queue = load_queue(api, queue_name)
    settle(api, queue)
    rows = api.store.lookup(queue.name, keys, include_body=False) if keys else []
    now = api.clock.now_ms()
    count = _append_bulk(
        api,
        queue,
        rows,
        lambda jobs: list(decide_retry(jobs, attempts, None, now, len(jobs))),
        caller,
    )
    api.metrics.count(catalogue.JOBS_TOTAL, count, queue=queue.name, action="retry")
    return count


def delete_selected(
    api: Api,
    caller: Caller | None,
    queue_name: str,
    state: JobState,
    keys: Sequence[tuple[int, int]],
) -> int:
    """The dashboard's delete of chosen jobs in `state`, as deleteJobs decides it."""
    queue = load_queue(api, queue_name)
    settle(api, queue)
    rows = api.store.lookup(queue.name, keys, include_body=False) if keys else []
    guarded = _guarded(api)
    count = _append_bulk(
        api, queue, rows, lambda jobs: list(decide_delete(jobs, state, len(jobs), guarded)), caller
    )
    api.metrics.count(catalogue.JOBS_TOTAL, count, queue=queue.name, action="delete")
    return count
