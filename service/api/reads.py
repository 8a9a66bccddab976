"""lookupJobs, getJobHistory, getJobCount, scanJobs: answered from the projection,
after the read barrier (barrier.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinledger.ledger.commands import check_priority
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.state import JobState
from pinledger.projections.history import build_history
from pinledger.projections.log_history import HistoryGoneError, HistoryScanLimitError, job_rows
from pinledger.projections.store import EventRow, JobFilter, QueueRow, ScanKey
from pinledger.service.api import convert
from pinledger.service.api import history as history_thrift
from pinledger.service.api.barrier import Partition, settle, wait_projected
from pinledger.service.api.continuation import CONTINUATION_END, continuation_after
from pinledger.service.api.core import Api, check_job, check_jobs, load_queue
from pinledger.service.api.errors import ErrorCode, pinlater_error
from pinledger.service.api.requests import CountRequest, HistoryRequest, LookupRequest, ScanRequest

# getJobCount answers an i32.
_INT32_MAX = 2**31 - 1


def job_filter(
    api: Api, queue: QueueRow, state: JobState, priority: int | None, regex: str | None
) -> JobFilter:
    """Which jobs a count, scan or bulk action looks at; refuses a priority outside
    1..max_priority and a regex Postgres cannot compile."""
    if priority is not None:
        check_priority(priority, api.limits)
    api.store.check_regex(regex)
    return JobFilter(queue.name, state, priority, regex)


def resolve(api: Api, queue: str, wanted: Sequence[JobDescriptor]) -> dict[str, JobDescriptor]:
    """Where each descriptor asked for names a job: an imported job's PinLater descriptor
    names its new place, every other descriptor itself. The importer makes sure no
    pinledger descriptor ever equals a PinLater descriptor it imported, so the two never
    compete (docs/decisions/0017-imported-descriptors.md)."""
    moved = api.store.imported(queue, sorted({str(d) for d in wanted}))
    return {str(d): moved.get(str(d), d) for d in wanted}


def lookup_jobs(api: Api, request: LookupRequest) -> dict[str, Any]:
    by_queue: dict[str, list[JobDescriptor]] = {}
    for parsed in request.jobs:
        by_queue.setdefault(parsed.queue, []).append(parsed)
    found: dict[str, Any] = {}
    for name, wanted in by_queue.items():
        queue = load_queue(api, name)
        targets = resolve(api, name, wanted)
        check_jobs(api, queue, targets.values())
        topic = api.writer.topic(name)
        waits: dict[Partition, int] = {}
        for d in targets.values():
            key = (topic, d.partition)
            waits[key] = max(waits.get(key, -1), d.offset)
        wait_projected(api, waits)
        asked: dict[tuple[int, int], list[str]] = {}
        for text, d in targets.items():
            asked.setdefault((d.partition, d.local_id), []).append(text)
        rows = api.store.lookup(name, list(asked), request.include_body)
        for row in rows:
            for text in asked.get((row.partition, row.job.local_id), []):
                # Answer under the descriptor asked for (priority in it is informative);
                # an imported job's info names its new descriptor.
                shown = str(targets[text])
                found[text] = convert.job_info(name, row, request.include_body, shown)
    return found


def history_rows(api: Api, queue: str, parsed: JobDescriptor) -> list[EventRow]:
    """A job's timeline rows: the projection's, and those the history retention dropped
    read from the log instead (passing over skipped records)."""
    return job_rows(
        api.store.job_events(queue, parsed.partition, parsed.local_id),
        api.writer.log,
        api.writer.topic(queue),
        parsed,
        api.config.history_scan_records,
        lambda: api.store.skipped_records(queue, parsed.partition),
    )


def get_job_history(api: Api, request: HistoryRequest) -> Any:
    queue = load_queue(api, request.job.queue)
    parsed = resolve(api, queue.name, [request.job])[str(request.job)]
    check_job(api, queue, parsed)
    wait_projected(api, {(api.writer.topic(queue.name), parsed.partition): parsed.offset})
    try:
        rows = history_rows(api, queue.name, parsed)
    except (HistoryGoneError, HistoryScanLimitError) as exc:
        raise pinlater_error(ErrorCode.UNKNOWN, str(exc)) from exc
    return history_thrift.to_thrift(build_history(parsed, rows, request.at_offset))


def get_job_count(api: Api, request: CountRequest) -> int:
    queue = load_queue(api, request.queue)
    where = job_filter(api, queue, request.state, request.priority, request.body_regex)
    settle(api, queue)
    count = api.store.count(where, api.clock.now_ms(), request.future)
    return min(count, _INT32_MAX)


def scan_jobs(api: Api, request: ScanRequest) -> Any:
    queue = load_queue(api, request.queue)
    where = job_filter(api, queue, request.state, request.priority, request.body_regex)
    settle(api, queue)
    limit = request.limit
    rows = api.store.scan(where, api.clock.now_ms(), request.future, request.after, limit + 1)
    page = rows[:limit]
    continuation = CONTINUATION_END
    if len(rows) > limit and page:
        last = page[-1]
        continuation = continuation_after(
            ScanKey(last.job.run_after, last.partition, last.job.local_id)
        )
    return convert.scan_response(queue.name, page, continuation)
