"""The Thrift edge without servers: requests parsed once with the IDL's defaults, and
every bad request answered with the ErrorCode docs/decisions/0003-error-codes.md gives
it (never an INTERNAL_ERROR for a client's mistake)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from thriftpy2.thrift import TApplicationException

from pinledger.idl import pinlater
from pinledger.ledger import limits
from pinledger.ledger.commands import Refused
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import LogError
from pinledger.ledger.state import JobState
from pinledger.projections.store import (
    InvalidRegexError,
    QueueRow,
    ScanKey,
    StoreError,
    StoreUnavailableError,
)
from pinledger.service.api import continuation, requests
from pinledger.service.api.handler import Handler
from pinledger.service.config import Config
from pinledger.service.observability.metrics import Metrics
from pinledger.service.queue_config import QueueSettings
from pinledger.service.security.password import hash_password

p = pinlater
E = pinlater.ErrorCode
SALT = "salt"
PASSWORD = "secret"
MAIL = QueueRow("mail", 4, 0)
DRAINED = QueueRow("drained", 2, 0)


class _Queues:
    """The queue directory: `mail`, `drained` (every partition draining), and `down`
    (whose lookup finds Kafka unreachable)."""

    def get(self, name: str) -> QueueRow | None:
        return {"mail": MAIL, "drained": DRAINED}.get(name)

    def get_or_log(self, name: str, log: object, topic: str) -> QueueRow | None:
        if name == "down":
            raise LogError("Kafka at localhost:9092 is unreachable")
        return self.get(name)


class _Writer:
    def __init__(self) -> None:
        self.log = FakeLog()  # no topics: a count needs nothing projected
        self.appended: dict[tuple[str, int], int] = {}

    def topic(self, name: str) -> str:
        return f"pl.{name}"


class _Store:
    def __init__(self) -> None:
        self.count_error: Exception | None = None

    def check_regex(self, regex: str | None) -> None:
        if regex == "(":
            raise InvalidRegexError("invalid body regex '(' (Postgres regular expression syntax)")

    def count(self, *_: object) -> int:
        if self.count_error is not None:
            raise self.count_error
        return 0


class _RateLimits:
    def allow(self, queue: str) -> bool:
        return False

    def rate(self, queue: str) -> float:
        return 0.0


class _QueueConfig:
    def settings(self, queue: str) -> QueueSettings:
        drained = frozenset(range(2)) if queue == "drained" else frozenset()
        return QueueSettings(drained_partitions=drained)


def _handler(store: _Store | None = None, password: bool = True) -> Handler:
    config = Config(
        server_id="test",
        max_body_bytes=8,
        admin_salt=SALT,
        admin_password_sha256=hash_password(PASSWORD, SALT) if password else "",
    )
    return Handler(
        config,
        cast(Any, store or _Store()),
        cast(Any, _Writer()),
        cast(Any, None),  # no owner: every call below fails before a dequeue
        Metrics(),
        cast(Any, _Queues()),
        cast(Any, _RateLimits()),
        cast(Any, _QueueConfig),  # called for the queue config: a stand-in with settings()
        cast(Any, None),
        FakeClock(),
    )


def _ctx() -> Any:
    return p.RequestContext(source="test:host", requestId="r-1")


def _code(call: Callable[[Handler], object], handler: Handler | None = None) -> int:
    with pytest.raises(p.PinLaterException) as raised:
        call(handler or _handler())
    return int(raised.value.errorCode)


def _job(**fields: Any) -> Any:
    fields.setdefault("body", b"x")
    return p.PinLaterJob(**fields)


def _enqueue(h: Handler, queue: Any = "mail", *jobs: Any) -> object:
    request = p.PinLaterEnqueueRequest(queueName=queue, jobs=list(jobs) or [_job()])
    return h.enqueueJobs(_ctx(), request)


def _ack(h: Handler, *descriptors: Any, delay: int = 0) -> object:
    infos = [p.PinLaterJobAckInfo(jobDescriptor=d, retryDelayMillis=delay) for d in descriptors]
    return h.ackDequeuedJobs(_ctx(), p.PinLaterJobAckRequest(queueName="mail", jobsFailed=infos))


def _count(h: Handler, **fields: Any) -> object:
    fields.setdefault("queueName", "mail")
    fields.setdefault("jobState", JobState.PENDING)
    return h.getJobCount(_ctx(), p.PinLaterGetJobCountRequest(**fields))


def _scan(h: Handler, **fields: Any) -> object:
    fields.setdefault("queueName", "mail")
    fields.setdefault("jobState", JobState.PENDING)
    return h.scanJobs(_ctx(), p.PinLaterScanJobsRequest(**fields))


BAD_REQUESTS: list[tuple[str, Callable[[Handler], object], int]] = [
    ("queue name with a dash", lambda h: h.createQueue(_ctx(), "has-dash"), E.QUEUE_NAME_INVALID),
    ("empty queue name", lambda h: h.createQueue(_ctx(), ""), E.QUEUE_NAME_INVALID),
    ("no queue name", lambda h: h.createQueue(_ctx(), None), E.QUEUE_NAME_INVALID),
    ("enqueue without a queue name", lambda h: _enqueue(h, None), E.QUEUE_NAME_INVALID),
    ("queue name too long", lambda h: h.createQueue(_ctx(), "q" * 65), E.QUEUE_NAME_TOO_LONG),
    ("enqueue to no such queue", lambda h: _enqueue(h, "nope"), E.QUEUE_NOT_FOUND),
    ("count on no such queue", lambda h: _count(h, queueName="nope"), E.QUEUE_NOT_FOUND),
    ("priority 4", lambda h: _enqueue(h, "mail", _job(priority=4)), E.PRIORITY_NOT_SUPPORTED),
    ("priority 0", lambda h: _enqueue(h, "mail", _job(priority=0)), E.PRIORITY_NOT_SUPPORTED),
    ("count at priority 9", lambda h: _count(h, priority=9), E.PRIORITY_NOT_SUPPORTED),
    ("body over the limit", lambda h: _enqueue(h, "mail", _job(body=b"x" * 9)), E.ENQUEUE_REJECTED),
    ("every partition draining", lambda h: _enqueue(h, "drained"), E.ENQUEUE_REJECTED),
    (
        "dequeue from a paused queue",
        lambda h: h.dequeueJobs(_ctx(), p.PinLaterDequeueRequest(queueName="mail", limit=1)),
        E.DEQUEUE_RATE_LIMITED,
    ),
    ("wrong password", lambda h: h.deleteQueue(_ctx(), "mail", "wrong"), E.PASSWORD_INVALID),
    ("no password", lambda h: h.deleteQueue(_ctx(), "mail", None), E.PASSWORD_INVALID),
    (
        "wrong password, bad name",
        lambda h: h.deleteQueue(_ctx(), "bad-name", "wrong"),
        E.PASSWORD_INVALID,
    ),
    ("continuation not ours", lambda h: _scan(h, continuation="bogus"), E.CONTINUATION_INVALID),
    ("continuation of two parts", lambda h: _scan(h, continuation="1.2"), E.CONTINUATION_INVALID),
    ("continuation negative", lambda h: _scan(h, continuation="1.-1.3"), E.CONTINUATION_INVALID),
    (
        "continuation past a bigint",
        lambda h: _scan(h, continuation="9223372036854775808.0.0"),
        E.CONTINUATION_INVALID,
    ),
    ("no request", lambda h: h.enqueueJobs(_ctx(), None), E.UNKNOWN),
    ("job without a body", lambda h: _enqueue(h, "mail", _job(body=None)), E.UNKNOWN),
    ("attempts 0", lambda h: _enqueue(h, "mail", _job(numAttemptsAllowed=0)), E.UNKNOWN),
    ("priority not a number", lambda h: _enqueue(h, "mail", _job(priority="1")), E.UNKNOWN),
    (
        "dequeue without a limit",
        lambda h: h.dequeueJobs(_ctx(), p.PinLaterDequeueRequest(queueName="mail")),
        E.UNKNOWN,
    ),
    (
        "dequeue with a negative limit",
        lambda h: h.dequeueJobs(_ctx(), p.PinLaterDequeueRequest(queueName="mail", limit=-1)),
        E.UNKNOWN,
    ),
    ("scan with a negative limit", lambda h: _scan(h, limit=-1), E.UNKNOWN),
    (
        "dequeue over the maximum limit",
        lambda h: h.dequeueJobs(_ctx(), p.PinLaterDequeueRequest(queueName="mail", limit=1001)),
        E.UNKNOWN,
    ),
    ("scan over the maximum limit", lambda h: _scan(h, limit=1001), E.UNKNOWN),
    ("malformed descriptor", lambda h: _ack(h, "garbage"), E.UNKNOWN),
    ("no descriptor", lambda h: _ack(h, None), E.UNKNOWN),
    ("descriptor of another queue", lambda h: _ack(h, "other:s0:p1:0"), E.UNKNOWN),
    ("descriptor past the partitions", lambda h: _ack(h, "mail:s4:p1:0"), E.UNKNOWN),
    ("negative retry delay", lambda h: _ack(h, "mail:s0:p1:0", delay=-1), E.UNKNOWN),
    ("job state out of range in a count", lambda h: _count(h, jobState=7), E.UNKNOWN),
    ("job state negative in a scan", lambda h: _scan(h, jobState=-1), E.UNKNOWN),
    (
        "job state out of range in a delete",
        lambda h: h.deleteJobs(_ctx(), p.PinLaterDeleteJobsRequest(queueName="mail", jobState=9)),
        E.UNKNOWN,
    ),
    ("no job state", lambda h: _count(h, jobState=None), E.UNKNOWN),
    ("invalid regex", lambda h: _count(h, bodyRegexToMatch="("), E.UNKNOWN),
    (
        "lookup of a malformed descriptor",
        lambda h: h.lookupJobs(_ctx(), p.PinLaterLookupJobRequest(jobDescriptors=["nonsense"])),
        E.UNKNOWN,
    ),
    (
        "history of a malformed descriptor",
        lambda h: h.getJobHistory(_ctx(), p.PinLaterJobHistoryRequest(jobDescriptor="x")),
        E.UNKNOWN,
    ),
    (
        "lookup of a descriptor whose queue name is too long",
        lambda h: h.lookupJobs(
            _ctx(), p.PinLaterLookupJobRequest(jobDescriptors=["q" * 65 + ":s0:p1:0"])
        ),
        E.QUEUE_NAME_TOO_LONG,
    ),
    ("Kafka unreachable", lambda h: _enqueue(h, "down"), E.SHARD_CONNECTION_FAILED),
]


@pytest.mark.parametrize(
    ("call", "code"),
    [(call, code) for _, call, code in BAD_REQUESTS],
    ids=[i for i, *_ in BAD_REQUESTS],
)
def test_bad_requests_get_their_error_code(call: Callable[[Handler], object], code: int) -> None:
    assert _code(call) == code


def test_an_out_of_range_job_state_says_which_states_exist() -> None:
    with pytest.raises(p.PinLaterException) as raised:
        _count(_handler(), jobState=7)
    assert "jobState 7" in raised.value.message and "3 (FAILED)" in raised.value.message


def test_a_limit_over_the_maximum_says_the_maximum() -> None:
    with pytest.raises(p.PinLaterException) as raised:
        _scan(_handler(), limit=5000)
    assert "limit 5000 is over the maximum of 1000" in raised.value.message


def test_no_admin_password_configured_refuses_every_delete() -> None:
    assert _code(lambda h: h.deleteQueue(_ctx(), "mail", ""), _handler(password=False)) == (
        E.PASSWORD_INVALID
    )


def test_postgres_failing_is_a_shard_error_and_a_bug_an_internal_one() -> None:
    store = _Store()
    store.count_error = StoreUnavailableError("Postgres is unreachable")
    assert _code(_count, _handler(store)) == E.SHARD_CONNECTION_FAILED
    # A refusal that would fail again the same way is not "try again elsewhere".
    for bug in (StoreError("Postgres refused counting: NumericValueOutOfRange"), RuntimeError()):
        store.count_error = bug
        with pytest.raises(TApplicationException) as raised:
            _count(_handler(store))
        assert raised.value.type == TApplicationException.INTERNAL_ERROR


# -- parsing and the IDL's defaults ------------------------------------------------------


def test_idl_defaults_are_read_from_the_loaded_idl() -> None:
    assert requests.idl_default(p.PinLaterJob, "numAttemptsAllowed", int) == 2
    assert requests.idl_default(p.PinLaterScanJobsRequest, "continuation", str) == "0"
    with pytest.raises(TypeError):
        requests.idl_default(p.PinLaterJob, "priority", str)


@pytest.mark.parametrize(
    "job",
    [
        p.PinLaterJob(body=b"x"),
        p.PinLaterJob(body=b"x", priority=None, numAttemptsAllowed=None, customStatus=None),
    ],
)
def test_an_enqueued_job_gets_the_idl_defaults(job: Any) -> None:
    parsed = requests.parse_enqueue(p.PinLaterEnqueueRequest(queueName="mail", jobs=[job]))
    (new,) = parsed.jobs
    assert (new.priority, new.attempts_allowed, new.custom_status, new.run_after) == (
        1,
        2,
        "",
        None,
    )


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (p.PinLaterJob(body=None), "job 1: body is required"),
        (p.PinLaterJob(body=b"x", priority="high"), "job 1: priority must be a int, got 'high'"),
        (p.PinLaterJob(body=b"x", customStatus=7), "job 1: customStatus must be a str, got 7"),
    ],
)
def test_a_bad_job_is_named_by_its_position(bad: Any, message: str) -> None:
    request = p.PinLaterEnqueueRequest(queueName="mail", jobs=[p.PinLaterJob(body=b"ok"), bad])
    with pytest.raises(Refused) as refused:
        requests.parse_enqueue(request)
    assert refused.value.message == message


def test_defaults_of_scans_retries_and_deletes() -> None:
    scan = requests.parse_scan(
        p.PinLaterScanJobsRequest(queueName="mail", jobState=0, continuation=None, limit=None)
    )
    assert (scan.limit, scan.after, scan.future, scan.state) == (100, None, False, JobState.PENDING)
    retry = requests.parse_retry(p.PinLaterRetryFailedJobsRequest(queueName="mail"))
    assert (retry.priority, retry.attempts, retry.limit, retry.run_after) == (1, 1, 1000, None)
    delete = requests.parse_delete_jobs(p.PinLaterDeleteJobsRequest(queueName="mail", jobState=3))
    assert (delete.priority, delete.limit, delete.state) == (1, 1000, JobState.FAILED)


def test_a_dequeue_with_piggybacked_acks_acks_in_its_own_queue() -> None:
    acks = p.PinLaterJobAckRequest(
        queueName=None,
        jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor="mail:s1:p2:3000")],
        jobsFailed=[p.PinLaterJobAckInfo(jobDescriptor="mail:s0:p1:7", retryDelayMillis=5)],
    )
    parsed = requests.parse_dequeue(
        p.PinLaterDequeueRequest(queueName="mail", limit=3, jobAckRequest=acks)
    )
    assert (parsed.limit, parsed.dry_run, parsed.coverage) == (3, False, 1.0)
    assert parsed.acks is not None and parsed.acks.queue == "mail"
    (ok,) = parsed.acks.succeeded
    (failed,) = parsed.acks.failed
    assert ok.job == JobDescriptor("mail", 1, 2, 3000) and ok.append_status == ""
    assert (failed.job.local_id, failed.retry_delay_ms) == (7, 5)


def test_continuations_read_back_what_a_scan_page_returned() -> None:
    key = ScanKey(1_700_000_000_000, 3, 42_001)
    assert continuation.parse_continuation(continuation.continuation_after(key)) == key
    assert continuation.parse_continuation("0") is None
    assert continuation.parse_continuation(None) is None


def test_checkpoint_bodies_are_utf8_and_flags_default_off() -> None:
    parsed = requests.parse_checkpoint(
        p.PinLaterCheckpointJobsRequest(
            queueName="mail",
            requests=[p.PinLaterCheckpointJobRequest(jobDescriptor="mail:s0:p1:1", newBody="é")],
        )
    )
    (item,) = parsed.checkpoints
    assert (item.new_body, item.move_to_pending, item.attempts_allowed) == (
        "é".encode(),
        False,
        None,
    )


def test_the_callers_context_is_read_once() -> None:
    assert requests.parse_caller(None) is None
    caller = requests.parse_caller(p.RequestContext(source="w:h", requestId=None))
    assert caller == requests.Caller(source="w:h", request_id="")


# -- strings: ledger/limits.py at the edge ----------------------------------------------

NUL, SURROGATE, NOT_UTF8 = "a\x00b", "a\ud800b", b"\xff\xfe"
# What each broken string is refused for, as the refusal says it.
BROKEN: list[tuple[str, Any, str]] = [
    ("NUL", NUL, "contains NUL"),
    ("surrogate", SURROGATE, "unpaired surrogate"),
    ("not UTF-8", NOT_UTF8, "not valid UTF-8"),
]


def _claim_ack(**info: Any) -> Callable[[Handler], object]:
    info.setdefault("jobDescriptor", "mail:s0:p1:0")
    request = p.PinLaterJobAckRequest(
        queueName="mail", jobsSucceeded=[p.PinLaterJobAckInfo(**info)]
    )
    return lambda h: h.ackDequeuedJobs(_ctx(), request)


def _checkpoint(**item: Any) -> Callable[[Handler], object]:
    item.setdefault("jobDescriptor", "mail:s0:p1:0")
    request = p.PinLaterCheckpointJobsRequest(
        queueName="mail", requests=[p.PinLaterCheckpointJobRequest(**item)]
    )
    return lambda h: h.checkpointJobs(_ctx(), request)


def _dequeue_acking(**info: Any) -> Callable[[Handler], object]:
    info.setdefault("jobDescriptor", "mail:s0:p1:0")
    acks = p.PinLaterJobAckRequest(queueName="mail", jobsFailed=[p.PinLaterJobAckInfo(**info)])
    request = p.PinLaterDequeueRequest(queueName="mail", limit=1, jobAckRequest=acks)
    return lambda h: h.dequeueJobs(_ctx(), request)


def _delete(**fields: Any) -> Callable[[Handler], object]:
    fields.setdefault("queueName", "mail")
    request = p.PinLaterDeleteJobsRequest(jobState=JobState.FAILED, **fields)
    return lambda h: h.deleteJobs(_ctx(), request)


def _lookup(*descriptors: Any) -> Callable[[Handler], object]:
    request = p.PinLaterLookupJobRequest(jobDescriptors=list(descriptors))
    return lambda h: h.lookupJobs(_ctx(), request)


def _history(descriptor: Any) -> Callable[[Handler], object]:
    return lambda h: h.getJobHistory(_ctx(), p.PinLaterJobHistoryRequest(jobDescriptor=descriptor))


# Every string field a request carries: (field, how a value reaches it, the ErrorCode of
# its refusal, its rule). RequestContext is in every method's arguments: below.
STRING_FIELDS: list[
    tuple[str, Callable[[Any], Callable[[Handler], object]], int, limits.TextRule]
] = [
    (
        "customStatus",
        lambda v: lambda h: _enqueue(h, "mail", _job(), _job(customStatus=v)),
        E.ENQUEUE_REJECTED,
        limits.CUSTOM_STATUS,
    ),
    (
        "appendCustomStatus",
        lambda v: _claim_ack(appendCustomStatus=v),
        E.UNKNOWN,
        limits.APPEND_STATUS,
    ),
    (
        "appendCustomStatus (piggybacked)",
        lambda v: _dequeue_acking(appendCustomStatus=v),
        E.UNKNOWN,
        limits.APPEND_STATUS,
    ),
    (
        "prependCustomStatus",
        lambda v: _checkpoint(prependCustomStatus=v),
        E.UNKNOWN,
        limits.PREPEND_STATUS,
    ),
    ("newBody", lambda v: _checkpoint(newBody=v), E.UNKNOWN, limits.NEW_BODY),
    (
        "bodyRegexToMatch (count)",
        lambda v: lambda h: _count(h, bodyRegexToMatch=v),
        E.UNKNOWN,
        limits.BODY_REGEX,
    ),
    (
        "bodyRegexToMatch (scan)",
        lambda v: lambda h: _scan(h, bodyRegexToMatch=v),
        E.UNKNOWN,
        limits.BODY_REGEX,
    ),
    (
        "bodyRegexToMatch (delete)",
        lambda v: _delete(bodyRegexToMatch=v),
        E.UNKNOWN,
        limits.BODY_REGEX,
    ),
    (
        "continuation",
        lambda v: lambda h: _scan(h, continuation=v),
        E.CONTINUATION_INVALID,
        limits.CONTINUATION,
    ),
    (
        "jobDescriptor (ack)",
        lambda v: _claim_ack(jobDescriptor=v),
        E.UNKNOWN,
        limits.JOB_DESCRIPTOR,
    ),
    (
        "jobDescriptor (checkpoint)",
        lambda v: _checkpoint(jobDescriptor=v),
        E.UNKNOWN,
        limits.JOB_DESCRIPTOR,
    ),
    (
        "jobDescriptor (lookup)",
        lambda v: _lookup("mail:s0:p1:0", v),
        E.UNKNOWN,
        limits.JOB_DESCRIPTOR,
    ),
    ("jobDescriptor (history)", _history, E.UNKNOWN, limits.JOB_DESCRIPTOR),
    (
        "queueName (enqueue)",
        lambda v: lambda h: _enqueue(h, v),
        E.QUEUE_NAME_INVALID,
        limits.QUEUE_NAME,
    ),
    (
        "queueName (count)",
        lambda v: lambda h: _count(h, queueName=v),
        E.QUEUE_NAME_INVALID,
        limits.QUEUE_NAME,
    ),
    (
        "name (createQueue)",
        lambda v: lambda h: h.createQueue(_ctx(), v),
        E.QUEUE_NAME_INVALID,
        limits.QUEUE_NAME,
    ),
    (
        "password",
        lambda v: lambda h: h.deleteQueue(_ctx(), "mail", v),
        E.PASSWORD_INVALID,
        limits.PASSWORD,
    ),
]


def _refusal(call: Callable[[Handler], object]) -> Any:
    with pytest.raises(p.PinLaterException) as raised:
        call(_handler())
    return raised.value


@pytest.mark.parametrize(
    ("field", "put", "code", "rule"), STRING_FIELDS, ids=[f[0] for f in STRING_FIELDS]
)
@pytest.mark.parametrize(("value", "said"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_string_no_store_can_hold_is_refused_naming_its_field_and_rule(
    field: str,
    put: Callable[[Any], Callable[[Handler], object]],
    code: int,
    rule: limits.TextRule,
    value: Any,
    said: str,
) -> None:
    if value == NUL and rule.nul_allowed:
        return  # newBody's NUL is a byte of the body: test_nul_in_a_new_body_is_a_body_byte
    if rule is limits.QUEUE_NAME and isinstance(value, str):
        said = "is invalid: use ASCII letters, digits and '_' only"
    refused = _refusal(put(value))
    name = field.split(" ", maxsplit=1)[0]
    assert (refused.errorCode, name in refused.message, said in refused.message) == (
        code,
        True,
        True,
    ), refused.message


LONG_FIELDS = [f for f in STRING_FIELDS if f[3].max_chars is not None and not f[3].truncate]


@pytest.mark.parametrize(
    ("field", "put", "code", "rule"), LONG_FIELDS, ids=[f[0] for f in LONG_FIELDS]
)
def test_a_string_past_its_limit_is_refused_and_one_at_it_is_not(
    field: str, put: Callable[[Any], Callable[[Handler], object]], code: int, rule: limits.TextRule
) -> None:
    assert rule.max_chars is not None
    refused = _refusal(put("q" * (rule.max_chars + 1)))
    if rule is limits.QUEUE_NAME:
        code = E.QUEUE_NAME_TOO_LONG
    assert refused.errorCode == code
    assert f"{rule.max_chars + 1} characters, the limit is {rule.max_chars}" in refused.message
    assert len(refused.message) < 300  # the value is not echoed back
    at_limit = _code_or_none(put("q" * rule.max_chars))
    assert at_limit != code or rule is limits.QUEUE_NAME  # "q"*64 is a fine name, not a queue


def _code_or_none(call: Callable[[Handler], object]) -> int | None:
    try:
        call(_handler())
    except p.PinLaterException as exc:
        if "the limit is" in exc.message:
            return int(exc.errorCode)
    except Exception:  # past the edge: the stand-ins of this file end there
        return None
    return None


@pytest.mark.parametrize(("value", "said"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
@pytest.mark.parametrize("field", ["source", "requestId"])
@pytest.mark.parametrize("method", sorted(p.PinLater.thrift_services))
def test_every_method_refuses_a_request_context_no_store_can_hold(
    method: str, field: str, value: Any, said: str
) -> None:
    ctx = p.RequestContext(source="w:h", requestId="r")
    setattr(ctx, field, value)
    args: list[Any] = [ctx]
    args_spec = getattr(p.PinLater, f"{method}_args").thrift_spec
    args += [None] * (len(args_spec) - 1)  # every other argument missing: refused later
    if method == "deleteQueue":
        args[2] = PASSWORD  # checked first: a caller without it learns nothing more
    with pytest.raises(p.PinLaterException) as raised:
        getattr(_handler(), method)(*args)
    assert raised.value.errorCode == E.UNKNOWN and raised.value.message.startswith(
        f"RequestContext.{field} "
    ), raised.value.message
    assert said in raised.value.message


def test_a_status_past_its_limit_is_truncated_as_pinlater_did_not_refused() -> None:
    long = "s" * (limits.MAX_CUSTOM_STATUS + 1)
    parsed = requests.parse_enqueue(
        p.PinLaterEnqueueRequest(queueName="mail", jobs=[_job(customStatus=long)])
    )
    assert parsed.jobs[0].custom_status == long  # decide_enqueue cuts it (test_commands.py)
    acks = requests.parse_ack(
        p.PinLaterJobAckRequest(
            queueName="mail",
            jobsSucceeded=[
                p.PinLaterJobAckInfo(jobDescriptor="mail:s0:p1:0", appendCustomStatus=long)
            ],
        )
    )
    assert acks.succeeded[0].append_status == long


def test_nul_in_a_new_body_is_a_body_byte() -> None:
    parsed = requests.parse_checkpoint(
        p.PinLaterCheckpointJobsRequest(
            queueName="mail",
            requests=[
                p.PinLaterCheckpointJobRequest(jobDescriptor="mail:s0:p1:1", newBody="a\x00é")
            ],
        )
    )
    assert parsed.checkpoints[0].new_body == "a\x00é".encode()


@pytest.mark.parametrize("name", ["é", "queue.é", "ß", "q\n"])
def test_a_queue_name_kafka_could_not_use_is_refused(name: str) -> None:
    # `\w` would take é, and Kafka topic names are [a-zA-Z0-9._-]: ours are ASCII.
    assert _code(lambda h: h.createQueue(_ctx(), name)) == E.QUEUE_NAME_INVALID
