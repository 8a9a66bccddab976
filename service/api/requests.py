"""PinLater requests, parsed once at the Thrift edge into typed, frozen values.

Everything a request says on its own is checked here, before anything is loaded: a
missing field, a queue name that is not `\\w+`, a malformed job descriptor, a state
that is not a PinLaterJobState, a negative limit, a scan continuation this server did
not issue, and every string against its rule in ledger/limits.py (no NUL, UTF-8 only,
a length limit): a record no store can hold is never appended. What needs the queue or
the configuration (does the queue exist, is the priority within max_priority, does the
descriptor name one of its partitions) is checked by the RPC modules. Defaults come
from the IDL (the loaded structs' default_spec), never typed again here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pinledger.idl import pinlater
from pinledger.ledger import descriptor, limits
from pinledger.ledger.commands import (
    MAX_DEQUEUE_LIMIT,
    MAX_SCAN_LIMIT,
    NewJob,
    RefusalCode,
    Refused,
    check_limit,
    check_queue_name,
)
from pinledger.ledger.descriptor import DescriptorError, JobDescriptor
from pinledger.ledger.limits import TextRule
from pinledger.ledger.state import JobState
from pinledger.projections.store import ScanKey
from pinledger.service.api.continuation import parse_continuation

_T = TypeVar("_T")


def idl_default(struct: Any, field: str, kind: type[_T]) -> _T:
    """The default the IDL gives `field` of `struct` (a loaded thriftpy2 struct)."""
    value = dict(struct.default_spec)[field]
    if not isinstance(value, kind):
        raise TypeError(f"the IDL default of {struct.__name__}.{field} is not a {kind.__name__}")
    return value


_JOB_PRIORITY = idl_default(pinlater.PinLaterJob, "priority", int)
_JOB_ATTEMPTS = idl_default(pinlater.PinLaterJob, "numAttemptsAllowed", int)
_JOB_STATUS = idl_default(pinlater.PinLaterJob, "customStatus", str)
_ACK_STATUS = idl_default(pinlater.PinLaterJobAckInfo, "appendCustomStatus", str)
_ACK_RETRY_DELAY = idl_default(pinlater.PinLaterJobAckInfo, "retryDelayMillis", int)
_DEQUEUE_DRY_RUN = idl_default(pinlater.PinLaterDequeueRequest, "dryRun", bool)
_DEQUEUE_COVERAGE = idl_default(pinlater.PinLaterDequeueRequest, "coverage", float)
_CHECKPOINT_TO_PENDING = idl_default(pinlater.PinLaterCheckpointJobRequest, "moveToPending", bool)
_LOOKUP_BODY = idl_default(pinlater.PinLaterLookupJobRequest, "includeBody", bool)
_COUNT_FUTURE = idl_default(pinlater.PinLaterGetJobCountRequest, "countFutureJobs", bool)
_SCAN_FUTURE = idl_default(pinlater.PinLaterScanJobsRequest, "scanFutureJobs", bool)
_SCAN_CONTINUATION = idl_default(pinlater.PinLaterScanJobsRequest, "continuation", str)
_SCAN_LIMIT = idl_default(pinlater.PinLaterScanJobsRequest, "limit", int)
_RETRY_PRIORITY = idl_default(pinlater.PinLaterRetryFailedJobsRequest, "priority", int)
_RETRY_ATTEMPTS = idl_default(pinlater.PinLaterRetryFailedJobsRequest, "attemptsToAllow", int)
_RETRY_LIMIT = idl_default(pinlater.PinLaterRetryFailedJobsRequest, "limit", int)
_DELETE_PRIORITY = idl_default(pinlater.PinLaterDeleteJobsRequest, "priority", int)
_DELETE_LIMIT = idl_default(pinlater.PinLaterDeleteJobsRequest, "limit", int)


# -- the typed requests --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Caller:
    """PinLater's RequestContext: who asked."""

    source: str
    request_id: str


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    queue: str
    jobs: tuple[NewJob, ...]


@dataclass(frozen=True, slots=True)
class AckInfo:
    job: JobDescriptor
    append_status: str
    retry_delay_ms: int


@dataclass(frozen=True, slots=True)
class AckRequest:
    queue: str
    succeeded: tuple[AckInfo, ...]
    failed: tuple[AckInfo, ...]


@dataclass(frozen=True, slots=True)
class DequeueRequest:
    queue: str
    limit: int
    dry_run: bool
    coverage: float
    acks: AckRequest | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    job: JobDescriptor
    new_body: bytes | None
    move_to_pending: bool
    run_after: int | None
    attempts_allowed: int | None
    prepend_status: str | None


@dataclass(frozen=True, slots=True)
class CheckpointRequest:
    queue: str
    checkpoints: tuple[Checkpoint, ...]


@dataclass(frozen=True, slots=True)
class LookupRequest:
    jobs: tuple[JobDescriptor, ...]
    include_body: bool


@dataclass(frozen=True, slots=True)
class HistoryRequest:
    job: JobDescriptor
    at_offset: int | None


@dataclass(frozen=True, slots=True)
class CountRequest:
    queue: str
    state: JobState
    priority: int | None
    future: bool
    body_regex: str | None


@dataclass(frozen=True, slots=True)
class ScanRequest:
    queue: str
    state: JobState
    priority: int | None
    future: bool
    after: ScanKey | None
    limit: int
    body_regex: str | None


@dataclass(frozen=True, slots=True)
class RetryRequest:
    queue: str
    priority: int
    attempts: int
    run_after: int | None
    limit: int


@dataclass(frozen=True, slots=True)
class DeleteJobsRequest:
    queue: str
    state: JobState
    priority: int
    body_regex: str | None
    limit: int


@dataclass(frozen=True, slots=True)
class CancelRequest:
    queue: str
    jobs: tuple[JobDescriptor, ...]
    reason: str


# -- fields ----------------------------------------------------------------------------


def _invalid(message: str) -> Refused:
    return Refused(RefusalCode.INVALID_ARGUMENT, message)


def _optional(value: Any, kind: type[_T], what: str) -> _T | None:
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise _invalid(f"{what} must be a {kind.__name__}, got {value!r}")
    return value


def _or_default(value: Any, kind: type[_T], what: str, default: _T) -> _T:
    found = _optional(value, kind, what)
    return default if found is None else found


def _required(value: Any, kind: type[_T], what: str) -> _T:
    found = _optional(value, kind, what)
    if found is None:
        raise _invalid(f"{what} is required")
    return found


def _text(
    value: Any,
    rule: TextRule,
    where: str = "",
    code: RefusalCode = RefusalCode.INVALID_ARGUMENT,
) -> str | None:
    """A string field checked against its rule (ledger/limits.py); None when unset. The
    refusal names the field (`where` says whose: "job 3: ") and the rule."""
    if value is None:
        return None
    wrong = limits.problem(rule, value)
    if wrong is not None:
        raise Refused(code, f"{where}{rule.name} {wrong}")
    text: str = value
    return text


def _text_or(
    value: Any,
    rule: TextRule,
    default: str,
    where: str = "",
    code: RefusalCode = RefusalCode.INVALID_ARGUMENT,
) -> str:
    found = _text(value, rule, where, code)
    return default if found is None else found


def _present(request: Any, what: str = "request") -> Any:
    if request is None:
        raise _invalid(f"{what} is required")
    return request


def parse_queue_name(value: Any, what: str = "queueName") -> str:
    """A queue name as PinLater accepts it (`\\w+` in ASCII, a Kafka topic's name, at
    most 64 characters)."""
    if value is None:
        raise Refused(RefusalCode.QUEUE_NAME_INVALID, f"{what} is required")
    if not isinstance(value, str):  # bytes: not UTF-8 on the wire
        raise Refused(
            RefusalCode.QUEUE_NAME_INVALID, f"{what} {limits.problem(limits.QUEUE_NAME, value)}"
        )
    check_queue_name(value, what)  # ASCII letters, digits, '_': no NUL, no surrogate
    return value


def parse_descriptor(text: Any) -> JobDescriptor:
    if text is None:
        raise DescriptorError("jobDescriptor is required")
    wrong = limits.problem(limits.JOB_DESCRIPTOR, text)
    if wrong is not None:
        raise DescriptorError(f"jobDescriptor {wrong}")
    found: str = text
    return descriptor.parse(found)


def parse_password(value: Any) -> str:
    """deleteQueue's admin password: a password no rule allows cannot be the right one,
    so it is refused as a wrong one (PASSWORD_INVALID), saying why."""
    if value is None:
        return ""
    wrong = limits.problem(limits.PASSWORD, value)
    if wrong is not None:
        raise Refused(RefusalCode.PASSWORD_INVALID, f"the admin password {wrong}")
    password: str = value
    return password


def _regex(value: Any) -> str | None:
    return _text(value, limits.BODY_REGEX)


def parse_state(value: Any) -> JobState:
    state = _required(value, int, "jobState")
    try:
        return JobState(state)
    except ValueError:
        names = ", ".join(f"{s.value} ({s.name})" for s in JobState)
        raise _invalid(f"jobState {state} is not a PinLaterJobState: use {names}") from None


def _limit(value: Any, default: int, maximum: int | None = None) -> int:
    limit = _or_default(value, int, "limit", default)
    check_limit(limit, maximum=maximum)
    return limit


# -- requests ---------------------------------------------------------------------------


def parse_caller(context: Any) -> Caller | None:
    """Who asked. Its source and requestId are in every record the call appends (and the
    source in claims and verdicts): checked like every other string."""
    if context is None:
        return None
    return Caller(
        source=_text_or(context.source, limits.SOURCE, "", "RequestContext."),
        request_id=_text_or(context.requestId, limits.REQUEST_ID, "", "RequestContext."),
    )


def parse_enqueue(request: Any) -> EnqueueRequest:
    request = _present(request)
    queue = parse_queue_name(request.queueName)
    jobs = tuple(
        NewJob(
            body=_required(job.body, bytes, f"job {i}: body"),
            priority=_or_default(job.priority, int, f"job {i}: priority", _JOB_PRIORITY),
            run_after=_optional(job.runAfterTimestampMillis, int, f"job {i}: runAfter"),
            attempts_allowed=_or_default(
                job.numAttemptsAllowed, int, f"job {i}: numAttemptsAllowed", _JOB_ATTEMPTS
            ),
            custom_status=_text_or(
                job.customStatus,
                limits.CUSTOM_STATUS,
                _JOB_STATUS,
                f"job {i}: ",
                code=RefusalCode.ENQUEUE_REJECTED,
            ),
            unique_key=_unique_key(job.uniqueKey, i),
        )
        for i, job in enumerate(request.jobs or [])
    )
    return EnqueueRequest(queue, jobs)


def _unique_key(value: Any, position: int) -> str | None:
    key = _text(value, limits.UNIQUE_KEY, f"job {position}: ", RefusalCode.ENQUEUE_REJECTED)
    if key == "":
        raise Refused(
            RefusalCode.ENQUEUE_REJECTED,
            f"job {position}: uniqueKey is empty: leave it unset for a job without a key",
        )
    return key


def _ack_info(info: Any) -> AckInfo:
    return AckInfo(
        job=parse_descriptor(info.jobDescriptor),
        append_status=_text_or(info.appendCustomStatus, limits.APPEND_STATUS, _ACK_STATUS),
        retry_delay_ms=_or_default(
            info.retryDelayMillis, int, "retryDelayMillis", _ACK_RETRY_DELAY
        ),
    )


def _acks(request: Any, queue: str) -> AckRequest:
    return AckRequest(
        queue=queue,
        succeeded=tuple(_ack_info(info) for info in request.jobsSucceeded or []),
        failed=tuple(_ack_info(info) for info in request.jobsFailed or []),
    )


def parse_ack(request: Any) -> AckRequest:
    request = _present(request)
    return _acks(request, parse_queue_name(request.queueName))


def parse_dequeue(request: Any) -> DequeueRequest:
    request = _present(request)
    queue = parse_queue_name(request.queueName)
    limit = _required(request.limit, int, "limit")
    check_limit(limit, maximum=MAX_DEQUEUE_LIMIT)
    acks = request.jobAckRequest
    return DequeueRequest(
        queue=queue,
        limit=limit,
        dry_run=_or_default(request.dryRun, bool, "dryRun", _DEQUEUE_DRY_RUN),
        coverage=_or_default(request.coverage, float, "coverage", _DEQUEUE_COVERAGE),
        # Piggybacked acks are for the dequeue's queue (their own queueName is not read).
        acks=None if acks is None else _acks(acks, queue),
    )


def _checkpoint(item: Any) -> Checkpoint:
    # A Thrift string the job's body is made of: NUL is fine (bytes), a surrogate is not.
    new_body = _text(item.newBody, limits.NEW_BODY)
    return Checkpoint(
        job=parse_descriptor(item.jobDescriptor),
        new_body=None if new_body is None else new_body.encode("utf-8"),
        move_to_pending=_or_default(
            item.moveToPending, bool, "moveToPending", _CHECKPOINT_TO_PENDING
        ),
        run_after=_optional(item.runAfterTimestampMillis, int, "runAfterTimestampMillis"),
        attempts_allowed=_optional(item.numOfAttemptsAllowed, int, "numOfAttemptsAllowed"),
        prepend_status=_text(item.prependCustomStatus, limits.PREPEND_STATUS),
    )


def parse_checkpoint(request: Any) -> CheckpointRequest:
    request = _present(request)
    return CheckpointRequest(
        queue=parse_queue_name(request.queueName),
        checkpoints=tuple(_checkpoint(item) for item in request.requests or []),
    )


def parse_lookup(request: Any) -> LookupRequest:
    request = _present(request)
    return LookupRequest(
        jobs=tuple(parse_descriptor(text) for text in request.jobDescriptors or []),
        include_body=_or_default(request.includeBody, bool, "includeBody", _LOOKUP_BODY),
    )


def parse_history(request: Any) -> HistoryRequest:
    request = _present(request)
    return HistoryRequest(
        job=parse_descriptor(request.jobDescriptor),
        at_offset=_optional(request.atOffset, int, "atOffset"),
    )


def parse_count(request: Any) -> CountRequest:
    request = _present(request)
    return CountRequest(
        queue=parse_queue_name(request.queueName),
        state=parse_state(request.jobState),
        priority=_optional(request.priority, int, "priority"),
        future=_or_default(request.countFutureJobs, bool, "countFutureJobs", _COUNT_FUTURE),
        body_regex=_regex(request.bodyRegexToMatch),
    )


def parse_scan(request: Any) -> ScanRequest:
    request = _present(request)
    return ScanRequest(
        queue=parse_queue_name(request.queueName),
        state=parse_state(request.jobState),
        priority=_optional(request.priority, int, "priority"),
        future=_or_default(request.scanFutureJobs, bool, "scanFutureJobs", _SCAN_FUTURE),
        body_regex=_regex(request.bodyRegexToMatch),
        limit=_limit(request.limit, _SCAN_LIMIT, MAX_SCAN_LIMIT),
        after=parse_continuation(
            _SCAN_CONTINUATION if request.continuation is None else request.continuation
        ),
    )


def parse_retry(request: Any) -> RetryRequest:
    request = _present(request)
    return RetryRequest(
        queue=parse_queue_name(request.queueName),
        priority=_or_default(request.priority, int, "priority", _RETRY_PRIORITY),
        attempts=_or_default(request.attemptsToAllow, int, "attemptsToAllow", _RETRY_ATTEMPTS),
        run_after=_optional(request.runAfterTimestampMillis, int, "runAfterTimestampMillis"),
        limit=_limit(request.limit, _RETRY_LIMIT),
    )


def parse_delete_jobs(request: Any) -> DeleteJobsRequest:
    request = _present(request)
    return DeleteJobsRequest(
        queue=parse_queue_name(request.queueName),
        state=parse_state(request.jobState),
        priority=_or_default(request.priority, int, "priority", _DELETE_PRIORITY),
        body_regex=_regex(request.bodyRegexToMatch),
        limit=_limit(request.limit, _DELETE_LIMIT),
    )


def parse_cancel(request: Any) -> CancelRequest:
    request = _present(request)
    return CancelRequest(
        queue=parse_queue_name(request.queueName),
        jobs=tuple(parse_descriptor(text) for text in request.jobDescriptors or []),
        reason=_text_or(request.reason, limits.CANCEL_REASON, ""),
    )
