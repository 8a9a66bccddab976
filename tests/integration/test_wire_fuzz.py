"""A wire fuzzer against a real server (issue 38): every method of thrift/pinlater.thrift,
every field of its arguments and request structs, sent as bytes on a socket with one
field changed at a time: NUL, unpaired surrogates and bytes that are not UTF-8, text
at, past and far past its limit (ledger/limits.py), astral characters, numbers at
their extremes, wrong wire types, fields left out; then a few malformed frames.

Every answer must be a result or a clear error: a PinLaterException (naming the field
when a rule of ledger/limits.py refuses it), never an INTERNAL_ERROR, never a dropped
connection on a well-formed frame. And another queue of the same server keeps serving
throughout and after (enqueue, dequeue, ack, and the ack projected), with /health and
/ready answering ok: a record no store can hold must never be accepted, or its
partition's owner stops projecting.

Deterministic (the case list is fixed; random text comes from one seed) and bounded:
about 1,100 calls, under a minute on two cores."""

from __future__ import annotations

import copy
import json
import math
import random
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from thriftpy2.thrift import TApplicationException

from pinledger.idl import pinlater as p
from pinledger.ledger import limits
from pinledger.ledger.kafka import KafkaLog
from pinledger.projections.pg.store import Store
from pinledger.service.testing.servers import ServerProcess, context, dequeue_until, running
from tests.integration.conftest import ADMIN_PASSWORD, server_settings
from tests.integration.thrift_frames import (
    BINARY,
    BOOL,
    BYTE,
    DOUBLE,
    I32,
    I64,
    LIST,
    SET,
    STRING,
    STRUCT,
    Answer,
    Raw,
    WireClient,
    frame,
    spec_arg,
)
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

SEED = 38
SOURCE = "fuzz:host"
# The server's body limit (PINLEDGER_MAX_BODY_BYTES), small so past-the-limit is cheap.
MAX_BODY = 64 * 1024
# A bystander round trip every this many cases.
CHECK_EVERY = 150
OMIT = object()

# The rules of ledger/limits.py, by the field name a request carries them in.
RULES: dict[str, limits.TextRule] = {
    rule.name: rule
    for rule in (
        limits.SOURCE,
        limits.REQUEST_ID,
        limits.CUSTOM_STATUS,
        limits.APPEND_STATUS,
        limits.PREPEND_STATUS,
        limits.NEW_BODY,
        limits.BODY_REGEX,
        limits.CONTINUATION,
        limits.JOB_DESCRIPTOR,
        limits.QUEUE_NAME,
        limits.PASSWORD,
    )
}
RULES["name"] = limits.QUEUE_NAME  # createQueue's and deleteQueue's argument
RULES["jobDescriptors"] = limits.JOB_DESCRIPTOR  # lookupJobs' list
# How a refusal names a list's element.
NAMED = {"jobDescriptors": "jobDescriptor"}
# Fields the server does not read: a piggybacked ack request's own queue name (the
# dequeue's queue is the acks' queue).
UNREAD = {("dequeueJobs", "request", "jobAckRequest", "queueName")}
UNREAD |= {("dequeueOwned", *path[1:]) for path in UNREAD}


@dataclass(frozen=True, slots=True)
class Case:
    method: str
    path: tuple[str | int, ...]
    label: str
    args: dict[str, Any]
    # The field name the refusal must name; None when any clear answer will do.
    refused_as: str | None

    def __str__(self) -> str:
        where = ".".join(str(step) for step in self.path)
        return f"{self.method} {where} = {self.label}"


@dataclass
class Target:
    """What the baselines name: the fuzzed queue, jobs claimed by SOURCE for acks and
    checkpoints to apply to (one per case that needs one), and the present time."""

    queue: str
    claimed: list[str]
    now: int

    def job(self) -> str:
        return self.claimed.pop() if len(self.claimed) > 1 else self.claimed[0]


def baselines(t: Target) -> dict[str, dict[str, Any]]:
    """A valid call of every method; each case changes one field of one of them."""
    ctx = {"source": SOURCE, "requestId": "fuzz-1"}
    info = {"jobDescriptor": t.claimed[0], "appendCustomStatus": "a", "retryDelayMillis": 0}
    acks = {"queueName": t.queue, "jobsSucceeded": [info], "jobsFailed": [dict(info)]}
    dequeue = {
        "queueName": t.queue,
        "limit": 1,
        "jobAckRequest": acks,
        "dryRun": True,
        "coverage": 1.0,
    }
    checkpoint = {
        "jobDescriptor": t.claimed[0],
        "newBody": "b",
        "moveToPending": False,
        "runAfterTimestampMillis": t.now,
        "numOfAttemptsAllowed": 2,
        "prependCustomStatus": "p",
    }
    job = {
        "body": b"fuzz",
        "priority": 1,
        "runAfterTimestampMillis": t.now + 3_600_000,  # not dequeued by the dequeues
        "numAttemptsAllowed": 2,
        "customStatus": "s",
    }
    filters = {"queueName": t.queue, "priority": 1, "bodyRegexToMatch": "fuzz"}
    return {
        "createQueue": {"context": ctx, "name": t.queue},
        "deleteQueue": {"context": ctx, "name": "fuzz_absent", "password": ADMIN_PASSWORD},
        "enqueueJobs": {"context": ctx, "request": {"queueName": t.queue, "jobs": [job]}},
        "dequeueJobs": {"context": ctx, "request": dequeue},
        "dequeueOwned": {"context": ctx, "request": copy.deepcopy(dequeue)},
        "ackDequeuedJobs": {"context": ctx, "request": copy.deepcopy(acks)},
        "checkpointJobs": {
            "context": ctx,
            "request": {"queueName": t.queue, "requests": [checkpoint]},
        },
        "lookupJobs": {
            "context": ctx,
            "request": {"jobDescriptors": [t.claimed[0]], "includeBody": True},
        },
        "getJobCount": {
            "context": ctx,
            "request": {**filters, "jobState": 0, "countFutureJobs": False},
        },
        "getQueueNames": {"context": ctx},
        "scanJobs": {
            "context": ctx,
            "request": {
                **filters,
                "jobState": 0,
                "scanFutureJobs": False,
                "continuation": "0",
                "limit": 10,
            },
        },
        "retryFailedJobs": {
            "context": ctx,
            "request": {
                "queueName": t.queue,
                "priority": 1,
                "attemptsToAllow": 1,
                "runAfterTimestampMillis": t.now,
                "limit": 10,
            },
        },
        "deleteJobs": {"context": ctx, "request": {**filters, "jobState": 3, "limit": 10}},
        "cancelJobs": {
            "context": ctx,
            "request": {"queueName": t.queue, "jobDescriptors": [t.claimed[0]], "reason": "r"},
        },
        "getJobHistory": {
            "context": ctx,
            "request": {"jobDescriptor": t.claimed[0], "atOffset": 1 << 40},
        },
    }


# -- the cases ---------------------------------------------------------------------------


def fields(cls: Any, values: dict[str, Any], path: tuple[Any, ...]) -> Iterator[Any]:
    """(path, spec type, spec arg) of every field of `cls` and of the structs and lists
    in `values`, depth first."""
    for spec in cls.thrift_spec.values():
        ttype, name, arg = spec[0], spec[1], spec_arg(spec)
        here = (*path, name)
        yield here, ttype, arg
        value = values.get(name)
        if ttype == STRUCT and isinstance(value, dict):
            yield from fields(arg, value, here)
        elif ttype == LIST and value:
            etype, earg = arg if isinstance(arg, tuple) else (arg, None)
            if etype == STRUCT:
                yield from fields(earg, value[0], (*here, 0))
            else:
                yield (*here, 0), etype, earg


def _ascii(rng: random.Random, size: int) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=size))


def _astral(rng: random.Random, size: int) -> str:
    # Letters and emoji outside the BMP (4 UTF-8 bytes each), and a non-printable tag
    # character (repr() writes it as '\U000e0001').
    return "".join(rng.choice("\U0001d11e\U0001f600\U00020000\U000e0001") for _ in range(size))


def mutations(
    ttype: int, name: str, rng: random.Random, element: bool
) -> Iterator[tuple[str, Any, bool]]:
    """(label, value or OMIT, whether a rule of ledger/limits.py must refuse it). A
    list's element keeps its type: the list's header gives it for all."""
    yield "missing", OMIT, False
    if ttype in (STRING, BINARY):
        rule = RULES.get(name)
        strict = ttype == STRING and rule is not None
        nul_ok = rule is not None and rule.nul_allowed
        yield "NUL", "a\x00b", strict and not nul_ok
        yield "empty", "", False
        yield "non-BMP", _astral(rng, 8), False
        yield "unpaired surrogate", "a\ud800b", strict
        yield "invalid UTF-8", b"\xff\xfe" + rng.randbytes(6), strict and ttype == STRING
        if rule is not None and rule.max_chars is not None:
            limit = rule.max_chars
            yield f"{limit} characters (the limit)", "x" * limit, False
            yield f"{limit + 1} characters", _ascii(rng, limit + 1), not rule.truncate
            yield f"{limit} astral characters", _astral(rng, limit), False
        if ttype == BINARY:
            yield f"{MAX_BODY + 1} bytes", rng.randbytes(MAX_BODY + 1), False
        capped = rule is not None and rule.max_chars is not None and not rule.truncate
        yield "1 MB", _ascii(rng, 1 << 20), strict and capped
        if not element:
            yield "wrong type (i32)", Raw(I32, struct.pack(">i", 7)), False
    elif ttype in (BYTE, I32, I64):
        bits = {BYTE: 8, I32: 32, I64: 64}[ttype]
        for value in (-(1 << (bits - 1)), -1, 0, (1 << (bits - 1)) - 1):
            yield str(value), value, False
        yield "wrong type (string)", Raw(STRING, struct.pack(">i", 1) + b"7"), False
    elif ttype == DOUBLE:
        for number in (math.nan, math.inf, -math.inf, -1.0, 0.0):
            yield str(number), number, False
        yield "wrong type (i64)", Raw(I64, struct.pack(">q", 1)), False
    elif ttype == BOOL:
        yield "wrong type (i32)", Raw(I32, struct.pack(">i", 2)), False
    elif ttype == STRUCT:
        yield "empty struct", {}, False
        yield "wrong type (string)", Raw(STRING, struct.pack(">i", 1) + b"x"), False
    elif ttype in (LIST, SET):
        yield "empty list", [], False
        yield "wrong type (string)", Raw(STRING, struct.pack(">i", 1) + b"x"), False


def _set(args: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    parent: Any = args
    for step in path[:-1]:
        parent = parent[step]
    if value is OMIT:
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            del parent[path[-1]]
    else:
        parent[path[-1]] = value


def cases(t: Target, rng: random.Random) -> list[Case]:
    found = []
    for method, base in baselines(t).items():
        args_type = getattr(p.PinLater, f"{method}_args")
        for path, ttype, _ in fields(args_type, base, ()):
            name = next(step for step in reversed(path) if isinstance(step, str))
            element = isinstance(path[-1], int)
            for label, value, refused in mutations(ttype, name, rng, element):
                args = copy.deepcopy(base)
                _set(args, path, value)
                named = NAMED.get(name, name) if refused and (method, *path) not in UNREAD else None
                found.append(Case(method, path, label, args, named))
    return found


# Malformed frames: the connection may be answered with a TApplicationException or
# closed; either way nobody else notices.
MALFORMED = {
    "a field of an unknown type": bytes.fromhex("80010001")
    + b"\x00\x00\x00\x0bgetJobCount"
    + struct.pack(">i", 1)
    + b"\x63\x00\x01\x00",
    "a string longer than its frame": bytes.fromhex("80010001")
    + b"\x00\x00\x00\x0bcreateQueue"
    + struct.pack(">i", 1)
    + b"\x0b\x00\x02"
    + struct.pack(">i", 1 << 20)
    + b"x",
    "a negative string length": bytes.fromhex("80010001")
    + b"\x00\x00\x00\x0bcreateQueue"
    + struct.pack(">i", 1)
    + b"\x0b\x00\x02"
    + struct.pack(">i", -5),
    "a struct without its end": bytes.fromhex("80010001")
    + b"\x00\x00\x00\x0bcreateQueue"
    + struct.pack(">i", 1)
    + b"\x0c\x00\x01\x0b\x00\x01\x00\x00\x00\x01a",
    "an unknown method": bytes.fromhex("80010001")
    + b"\x00\x00\x00\x05nope_"
    + struct.pack(">i", 1)
    + b"\x00",
    "a list of a billion strings": bytes.fromhex("80010001")
    + b"\x00\x00\x00\x0alookupJobs"
    + struct.pack(">i", 1)
    + b"\x0c\x00\x02\x0f\x00\x01\x0b"
    + struct.pack(">i", 1 << 30),
}


def judge(case: Case, answer: Answer) -> str | None:
    """What is wrong with `answer` to `case`, or None."""
    if answer.kind == "closed":
        return f"the connection was dropped ({answer.message or 'closed'})"
    if answer.kind == "application":
        return f"answered {answer}"
    if case.refused_as is not None:
        if answer.kind != "error":
            return f"accepted ({answer}); ledger/limits.py refuses it"
        if case.refused_as not in answer.message:
            return f"the refusal does not name {case.refused_as!r}: {answer}"
    if answer.kind == "error" and answer.code == p.ErrorCode.SHARD_CONNECTION_FAILED:
        return f"answered as if storage were down: {answer}"
    return None


# -- the server and the bystander --------------------------------------------------------


@pytest.fixture
def fuzzed(kafka: KafkaLog, tmp_path: Path) -> Iterator[ServerProcess]:
    tag = uuid.uuid4().hex[:10]
    server = ServerProcess(
        prefix=f"fuzz{tag}.",
        schema=f"fuzz_{tag}",
        settings=server_settings(PINLEDGER_MAX_BODY_BYTES=str(MAX_BODY), PINLEDGER_READ_WAIT_S="3"),
    )
    with running([server], tmp_path):
        yield server
    for topic in kafka.topics():
        if topic.startswith(server.prefix):
            kafka.delete_topic(topic)
    Store(stack_settings().pg_dsn, server.schema).drop()


class Bystander:
    """Another queue of the server: a job enqueued, dequeued, acked, and its ack
    projected, every so often."""

    def __init__(self, server: ServerProcess, queue: str) -> None:
        self.server = server
        self.queue = queue
        self.client = server.client()
        self.rounds = 0

    def round_trip(self) -> str | None:
        """None when the queue served a whole round trip; else what went wrong."""
        self.rounds += 1
        body = f"bystander {self.rounds}".encode()
        try:
            (descriptor,) = self.client.enqueueJobs(
                context(),
                p.PinLaterEnqueueRequest(queueName=self.queue, jobs=[p.PinLaterJob(body=body)]),
            ).jobDescriptors
            got = dequeue_until(self.client, self.queue, 1, limit=1, timeout=20)
            if got != {descriptor: body}:
                return f"dequeued {got}, expected {descriptor}"
            self.client.ackDequeuedJobs(
                context(),
                p.PinLaterJobAckRequest(
                    queueName=self.queue,
                    jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=descriptor)],
                ),
            )
            info = self.client.lookupJobs(
                context(), p.PinLaterLookupJobRequest(jobDescriptors=[descriptor])
            )[descriptor]
            if info.jobState != p.PinLaterJobState.SUCCEEDED:
                return f"{descriptor} is {info.jobState} after its ack, not SUCCEEDED"
        except (p.PinLaterException, TApplicationException, AssertionError, OSError) as exc:
            self.client.close()
            self.client = self.server.client()
            return f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"
        return self.health()

    def close(self) -> None:
        self.client.close()

    def health(self) -> str | None:
        for path in ("/health", "/ready"):
            try:
                with self.server.admin_get(path, timeout=5) as answer:
                    status = json.loads(answer.read()).get("status")
            except OSError as exc:
                return f"{path}: {exc}"
            if status != "ok":
                return f"{path} says {status}"
        return None


def _claimed(server: ServerProcess, queue: str, count: int) -> list[str]:
    """`count` jobs of `queue` enqueued and dequeued by SOURCE: jobs an ack or a
    checkpoint from SOURCE applies to."""
    client = server.client()
    jobs = [p.PinLaterJob(body=f"claimed {i}".encode()) for i in range(count)]
    client.enqueueJobs(context(SOURCE), p.PinLaterEnqueueRequest(queueName=queue, jobs=jobs))
    got = dequeue_until(client, queue, count, limit=count, source=SOURCE)
    client.close()
    return sorted(got)


def test_every_field_of_every_method_gets_a_clear_answer_and_the_server_serves_on(
    fuzzed: ServerProcess,
) -> None:
    started = time.monotonic()
    client = fuzzed.client()
    suffix = uuid.uuid4().hex[:8]
    queue, other = f"fuzz_{suffix}", f"other_{suffix}"
    for name in (queue, other):
        client.createQueue(context(), name)
    client.close()
    rng = random.Random(SEED)
    target = Target(queue, _claimed(fuzzed, queue, 400), int(time.time() * 1000))
    all_cases = cases(target, rng)
    # Checked before any connection stays open: a socket a failed test leaves behind is
    # collected during a later test, which then fails on its ResourceWarning.
    assert {c.method for c in all_cases} == set(p.PinLater.thrift_services)
    bystander = Bystander(fuzzed, other)
    assert bystander.round_trip() is None
    wire = WireClient(fuzzed.port)
    failures: list[str] = []
    stalled: str | None = None
    since = 0
    for number, case in enumerate(all_cases, 1):
        # Acks, checkpoints and cancels act on a job of their own, claimed by SOURCE.
        args = case.args
        if case.method in ("ackDequeuedJobs", "checkpointJobs", "dequeueJobs", "cancelJobs"):
            args = _retarget(args, target.claimed[0], target.job())
        answer = wire.call(case.method, args)
        problem = judge(case, answer)
        if problem is not None:
            failures.append(f"{case}: {problem}")
        if answer.kind == "closed":
            wire.reconnect()
        if number % CHECK_EVERY == 0 or number == len(all_cases):
            trouble = bystander.round_trip()
            if trouble is not None:
                stalled = (
                    f"queue {other} stopped serving after cases {since + 1}..{number} "
                    f"({all_cases[since]} .. {case}): {trouble}"
                )
                break
            since = number
    for label, payload in MALFORMED.items():
        if stalled is not None:
            break
        # Answered with an error, and the connection serves on: each call is read from
        # its own frame.
        answer = wire.send(frame(payload))
        if answer.kind not in ("application", "error") or (
            answer.code == TApplicationException.INTERNAL_ERROR
        ):
            failures.append(f"malformed frame, {label}: {answer}")
            wire.reconnect()
        elif wire.call("getQueueNames", {}).kind != "result":
            failures.append(f"malformed frame, {label}: the connection serves no more")
            wire.reconnect()
    if stalled is None:
        stalled = bystander.round_trip()
    wire.close()
    bystander.close()
    elapsed = time.monotonic() - started
    report = "\n".join(failures[:60]) + (
        f"\n... and {len(failures) - 60} more" if len(failures) > 60 else ""
    )
    assert stalled is None, f"{stalled}\n{report}\n(server log:)\n{fuzzed.log_tail(3000)}"
    assert not failures, f"{len(failures)} of {len(all_cases)} cases:\n{report}"
    print(f"{len(all_cases)} cases and {len(MALFORMED)} malformed frames in {elapsed:.1f} s")


def _retarget(value: Any, old: str, new: str) -> Any:
    """`value` (a call's arguments) with every `old` descriptor in it replaced by `new`."""
    if value == old:
        return new
    if isinstance(value, dict):
        return {key: _retarget(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_retarget(item, old, new) for item in value]
    return value
