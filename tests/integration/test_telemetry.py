"""OpenTelemetry against the real Kafka and Postgres: the spans of a job's life (with
the SDK's in-memory exporter and an in-process server), the ledger metrics on
/metrics, and the OTLP export of a finished job's history (to an OTLP/HTTP receiver on
loopback)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import thriftpy2
from opentelemetry import trace
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, StatusCode
from thriftpy2.utils import deserialize, serialize

from pinledger.client.client import PinLaterClient
from pinledger.client.examples.enqueue_jobs import thumbnail_jobs
from pinledger.client.jobs import Ack, DequeuedJob, Job, JobState
from pinledger.client.tracing import job_span
from pinledger.idl import pinlater
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.observability import job_trace, telemetry
from pinledger.service.server import Server
from pinledger.service.testing.servers import (
    ROOT,
    ServerProcess,
    context,
    free_port,
    run_pinledger,
    running,
    wait_for,
)
from pinledger.service.testing.spans import captured_spans
from tests.integration.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished spans of this process (service/testing/spans.py)."""
    with captured_spans() as exporter:
        yield exporter


@pytest.fixture
def inproc(config: Config, prefix: str, spans: InMemorySpanExporter) -> Iterator[Server]:
    """A server in this process (its spans land in `spans`), with a short claim timeout."""
    schema = f"tel_{uuid.uuid4().hex[:10]}"
    settings = dataclasses.replace(
        config,
        topic_prefix=prefix,
        schema=schema,
        port=free_port(),
        admin_port=free_port(),
        server_id=f"tel-{uuid.uuid4().hex[:6]}",
        claim_timeout_s=2.0,
    )
    instance = Server(settings)
    instance.start()
    try:
        yield instance
    finally:
        instance.stop()
        Store(config.pg_dsn, schema).drop()


def test_a_new_owner_hands_out_the_trace_context_of_jobs_enqueued_before_it(
    inproc: Server, spans: InMemorySpanExporter
) -> None:
    """The context lives in memory on the owner; a server taking the partition over
    (restart, failover) must load it with the jobs."""
    queue = f"q_{uuid.uuid4().hex[:10]}"
    with PinLaterClient(f"127.0.0.1:{inproc.config.port}", source="tel:worker") as client:
        client.create_queue(queue)
        spans.clear()
        [descriptor] = client.enqueue(queue, [Job(b"survives the handover")])
        (enqueue,) = _named(spans, "pinlater/enqueueJobs")
        wait_for(lambda: client.count(queue, JobState.PENDING) == 1)
    inproc.stop()

    successor = Server(
        dataclasses.replace(
            inproc.config,
            port=free_port(),
            admin_port=free_port(),
            server_id=f"tel-{uuid.uuid4().hex[:6]}",
        )
    )
    successor.start()
    try:
        with PinLaterClient(f"127.0.0.1:{successor.config.port}", source="tel:w2") as client:
            [job] = _dequeue(client, queue, 1)
    finally:
        successor.stop()
    assert job.descriptor == descriptor
    # The successor hands out a context in the job's own trace, as the first owner would.
    handed = telemetry.parse_traceparent(job.traceparent)
    assert handed is not None
    assert handed.trace_id == job_trace.trace_id(
        telemetry.format_traceparent(_ctx(enqueue)), descriptor
    )


def _named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def _ctx(span: ReadableSpan) -> SpanContext:
    ctx: SpanContext | None = span.context
    assert ctx is not None
    return ctx


def _links_to(span: ReadableSpan, target: ReadableSpan) -> bool:
    want = _ctx(target)
    return any(
        link.context.trace_id == want.trace_id and link.context.span_id == want.span_id
        for link in span.links
    )


def _child_of(span: ReadableSpan, parent: ReadableSpan) -> bool:
    return (
        span.parent is not None
        and span.parent.span_id == _ctx(parent).span_id
        and _ctx(span).trace_id == _ctx(parent).trace_id
    )


def _wait_span(
    spans: InMemorySpanExporter, name: str, match: Callable[[ReadableSpan], bool]
) -> ReadableSpan:
    def found() -> ReadableSpan | None:
        return next((s for s in _named(spans, name) if match(s)), None)

    span: ReadableSpan = wait_for(found, timeout=30)
    return span


def _metric(server: Server, line_start: str) -> float:
    url = f"http://127.0.0.1:{server.admin.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _dequeue(client: PinLaterClient, queue: str, count: int) -> list[DequeuedJob]:
    got: list[DequeuedJob] = []

    def more() -> bool:
        got.extend(client.dequeue(queue, count - len(got)))
        return len(got) >= count

    wait_for(more, timeout=30)
    return got


def test_a_jobs_life_is_traced_and_linked_to_its_enqueue(
    inproc: Server, spans: InMemorySpanExporter
) -> None:
    server = inproc
    queue = f"q_{uuid.uuid4().hex[:10]}"
    address = f"127.0.0.1:{server.config.port}"
    with PinLaterClient(address, source="tel:worker") as client:
        client.create_queue(queue)
        spans.clear()
        ok, fails = client.enqueue(queue, [Job(b"ok"), Job(b"fails")])

        # The enqueue call: a root SERVER span describing the call.
        (enqueue,) = _named(spans, "pinlater/enqueueJobs")
        assert enqueue.kind == SpanKind.SERVER
        assert enqueue.parent is None
        attrs = enqueue.attributes or {}
        assert attrs["pinledger.queue"] == queue
        assert attrs["pinledger.jobs_in"] == 2
        assert attrs["pinledger.jobs_out"] == 2
        assert attrs["pinledger.source"] == "tel:worker"
        assert str(attrs["pinledger.request_id"])
        assert attrs["pinledger.error_code"] == "ok"
        enqueue_tp = telemetry.format_traceparent(_ctx(enqueue))

        # Each job is a trace of its own: its `create` span hangs under the job's span
        # (exported when the job ends) and links to the call.
        creates = _named(spans, f"create {queue}")
        assert sorted(_message_id(c) for c in creates) == sorted([ok, fails])
        for create in creates:
            job_ctx = _parsed(job_trace.job_traceparent(enqueue_tp, _message_id(create)))
            assert create.kind == SpanKind.PRODUCER
            assert _ctx(create).trace_id == job_ctx.trace_id != _ctx(enqueue).trace_id
            assert create.parent is not None and create.parent.span_id == job_ctx.span_id
            assert _links_to(create, enqueue)

        # The worker gets, with each job, the context of the attempt its claim started.
        dequeued = _dequeue(client, queue, 2)
        jobs = {job.descriptor: job for job in dequeued}
        assert set(jobs) == {ok, fails}
        for d, job in jobs.items():
            assert _parsed(job.traceparent).trace_id == job_trace.trace_id(enqueue_tp, d)

        # The claim: a child of the dequeue call, linking to each job's trace.
        dequeue_calls = _named(spans, "pinlater/dequeueJobs")
        claims = _named(spans, f"pinledger claim {queue}")
        assert claims
        for claim in claims:
            for d in _descriptors(claim):
                assert _links_to_context(claim, job_trace.job_traceparent(enqueue_tp, d))
            assert any(_child_of(claim, call) for call in dequeue_calls)
        assert sum((c.attributes or {})["pinledger.jobs"] for c in claims) == 2  # type: ignore[misc]
        # ... naming the jobs it claimed, searchable in a viewer.
        assert sorted(d for c in claims for d in _descriptors(c)) == sorted([ok, fails])

        # The worker's span nests in the attempt; the handler's own span inside it.
        user_tracer = trace.get_tracer("tests.user")
        with job_span(queue, jobs[ok]), user_tracer.start_as_current_span("resize thumbnail"):
            pass
        (processed,) = _named(spans, f"process {queue}")
        (user_span,) = _named(spans, "resize thumbnail")
        assert processed.parent is not None
        assert processed.parent.span_id == _parsed(jobs[ok].traceparent).span_id
        assert _child_of(user_span, processed)

        _acks_and_timeout(client, spans, queue, enqueue, processed, ok, fails)
    _ledger_metrics(server, queue)


def _message_id_or(span: ReadableSpan) -> str | None:
    value = (span.attributes or {}).get("messaging.message.id")
    return None if value is None else str(value)


def _parsed(traceparent: str | None) -> SpanContext:
    ctx = telemetry.parse_traceparent(traceparent)
    assert ctx is not None, traceparent
    return ctx


def _message_id(span: ReadableSpan) -> str:
    return str((span.attributes or {})["messaging.message.id"])


def _links_to_context(span: ReadableSpan, traceparent: str | None) -> bool:
    want = _parsed(traceparent)
    return any(
        link.context.trace_id == want.trace_id and link.context.span_id == want.span_id
        for link in span.links
    )


def _acks_and_timeout(
    client: PinLaterClient,
    spans: InMemorySpanExporter,
    queue: str,
    enqueue: ReadableSpan,
    processed: ReadableSpan,
    ok: str,
    fails: str,
) -> None:
    enqueue_tp = telemetry.format_traceparent(_ctx(enqueue))
    # Acks: as the owner applies them, each job's attempt goes out live, in the job's
    # trace, under the job's span; the worker's span is inside the attempt.
    client.ack(queue, succeeded=[ok], failed=[Ack(fails, "no luck", retry_delay_ms=0)])
    (ack_call,) = _named(spans, "pinlater/ackDequeuedJobs")
    assert (ack_call.attributes or {})["pinledger.jobs_in"] == 2
    ran = _wait_span(spans, "attempt 1", lambda s: _message_id(s) == ok)
    assert processed.parent is not None and _ctx(ran).span_id == processed.parent.span_id
    assert ran.start_time is not None and processed.start_time is not None
    assert ran.end_time is not None and processed.end_time is not None
    assert ran.start_time <= processed.start_time <= processed.end_time <= ran.end_time
    failed = _wait_span(spans, "attempt 1", lambda s: _message_id(s) == fails)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "failed: no luck"
    # The job that succeeded ends: its span, the root of its trace, links to the call.
    life = _wait_span(spans, f"job {ok}", lambda s: True)
    assert life.parent is None
    assert _ctx(life).trace_id == _ctx(ran).trace_id
    assert ran.parent is not None and ran.parent.span_id == _ctx(life).span_id
    assert _links_to(life, enqueue)
    assert (life.attributes or {})["pinledger.final_state"] == "SUCCEEDED"
    assert life.status.status_code is not StatusCode.ERROR

    # A second ack of the finished job: rejected by the ledger, and said so in a
    # root span linking to the ack call, naming the job (the owner no longer holds a
    # finished job's context, so it links to the job's trace only while it lives).
    client.ack(queue, succeeded=[ok])
    ack_calls = _named(spans, "pinlater/ackDequeuedJobs")
    stale = _wait_span(spans, f"pinledger rejected {queue}", lambda s: _links_to(s, ack_calls[-1]))
    assert stale.parent is None
    assert (stale.attributes or {})["pinledger.succeeded.rejected"] == 1
    assert _descriptors(stale) == [ok]

    # The failed job comes back; its claim runs out (claim timeout 2 s): the
    # timeout span links to the job's trace, and the attempt is an error there.
    (again,) = _dequeue(client, queue, 1)
    assert again.descriptor == fails
    assert _parsed(again.traceparent).trace_id == job_trace.trace_id(enqueue_tp, fails)
    timeout = _wait_span(
        spans,
        "pinledger timeout",
        lambda s: _links_to_context(s, job_trace.job_traceparent(enqueue_tp, fails)),
    )
    assert timeout.parent is None
    assert (timeout.attributes or {})["pinledger.queue"] == queue
    assert (timeout.attributes or {})["messaging.message.id"] == fails
    lost = _wait_span(spans, "attempt 2", lambda s: _message_id(s) == fails)
    assert lost.status.status_code is StatusCode.ERROR
    assert str(lost.status.description).startswith("timed out")
    assert _ctx(lost).span_id == _parsed(again.traceparent).span_id


def _descriptors(span: ReadableSpan) -> list[str]:
    """The jobs a span of the owner says it acted on."""
    return [str(d) for d in (span.attributes or {}).get("pinledger.descriptors", ())]  # type: ignore[union-attr]


def _ledger_metrics(server: Server, queue: str) -> None:
    """What the ledger applied, on /metrics."""

    def label(outcome: str) -> str:
        return f'pinledger_ledger_jobs_total{{outcome="{outcome}",queue="{queue}"}}'

    wait_for(lambda: _metric(server, label("timed_out")) == 1)
    assert _metric(server, label("enqueued")) == 2
    assert _metric(server, label("claimed")) == 3
    assert _metric(server, label("succeeded")) == 1
    # The failure ack with an attempt left, then the timeout on the last attempt.
    assert _metric(server, label("retried")) == 1
    assert _metric(server, label("failed")) == 1
    rejected = f'pinledger_ledger_rejected_total{{action="Succeeded",queue="{queue}"}}'
    assert _metric(server, rejected) == 1
    assert _metric(server, f'pinledger_ledger_queue_wait_seconds_count{{queue="{queue}"}}') == 3
    for outcome in ("succeeded", "retried", "timed_out"):
        runs = f'pinledger_ledger_run_seconds_count{{outcome="{outcome}",queue="{queue}"}}'
        assert _metric(server, runs) == 1, outcome


def test_old_clients_read_a_dequeue_response_with_traceparents(tmp_path: Path) -> None:
    """The IDL without field 3 (PinLater's) decodes a response that has it: same jobs,
    same metadata (docs/decisions/0005-dequeue-traceparents.md)."""
    idl = (ROOT / "thrift" / "pinlater.thrift").read_text()
    field = "  3: optional map<string, string> jobTraceparents,\n"
    assert field in idl
    old_idl = tmp_path / "pinlater_old.thrift"
    old_idl.write_text(idl.replace(field, ""))
    old = thriftpy2.load(str(old_idl), module_name="pinlater_old_thrift")
    assert not hasattr(old.PinLaterDequeueResponse(), "jobTraceparents")

    key = "pinlater:q:0:1:5"
    response = pinlater.PinLaterDequeueResponse(
        jobs={key: b"body"},
        jobMetadata={key: pinlater.PinLaterDequeueMetadata(attemptsAllowed=2, attemptsRemaining=1)},
        jobTraceparents={key: "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
    )
    decoded = deserialize(old.PinLaterDequeueResponse(), serialize(response))
    assert decoded.jobs == {key: b"body"}
    assert decoded.jobMetadata[key].attemptsRemaining == 1


def _pinledger(
    server: Server, receiver: OtlpReceiver, *args: str
) -> subprocess.CompletedProcess[str]:
    return run_pinledger(
        *args,
        "--server",
        f"127.0.0.1:{server.config.port}",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_SERVICE_NAME="pinledger-test",
    )


def test_trace_otlp_delivers_the_jobs_life_intact(
    inproc: Server, spans: InMemorySpanExporter, receiver: OtlpReceiver
) -> None:
    queue = f"q_{uuid.uuid4().hex[:10]}"
    with PinLaterClient(f"127.0.0.1:{inproc.config.port}", source="tel:otlp") as client:
        client.create_queue(queue)
        spans.clear()
        (descriptor,) = client.enqueue(queue, [Job(b"twice")])
        (enqueue,) = _named(spans, "pinlater/enqueueJobs")
        _dequeue(client, queue, 1)
        client.ack(queue, failed=[Ack(descriptor, "first try", retry_delay_ms=0)])
        _dequeue(client, queue, 1)
        client.ack(queue, succeeded=[Ack(descriptor, "done")])
        wait_for(lambda: client.lookup([descriptor])[descriptor].state == JobState.SUCCEEDED)

    done = _pinledger(inproc, receiver, "trace", descriptor, "--otlp")
    assert done.returncode == 0, done.stderr
    assert "2 attempts" in done.stdout
    steps = json.loads(_pinledger(inproc, receiver, "trace", descriptor, "--json").stdout)["steps"]

    # One request, one resource, all the job's spans.
    (request,) = receiver.requests
    (resource_spans,) = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert service["service.name"] == "pinledger-test"
    received = [span for scope in resource_spans.scope_spans for span in scope.spans]
    by_name = {span.name: span for span in received}
    assert sorted(by_name) == ["attempt 1", "attempt 2", f"job {descriptor}"]
    root = by_name[f"job {descriptor}"]

    # The job's own trace, the one the server drew live: the job's span is its root,
    # linking to the enqueue call.
    enqueue_tp = telemetry.format_traceparent(_ctx(enqueue))
    assert root.trace_id.hex() == f"{job_trace.trace_id(enqueue_tp, descriptor):032x}"
    assert not root.parent_span_id
    (link,) = root.links
    assert (link.trace_id.hex(), link.span_id.hex()) == (
        f"{_ctx(enqueue).trace_id:032x}",
        f"{_ctx(enqueue).span_id:016x}",
    )
    for number in (1, 2):
        attempt = by_name[f"attempt {number}"]
        assert attempt.trace_id == root.trace_id
        assert attempt.parent_span_id == root.span_id
    # From the millisecond of its first step to the end of the millisecond of its last.
    assert root.start_time_unix_nano == steps[0]["at"] * 1_000_000
    assert root.end_time_unix_nano == (steps[-1]["at"] + 1) * 1_000_000 - 1
    # ... and the same spans as the server sent live when the job ended.
    live = {_ctx(s).span_id for s in spans.get_finished_spans() if _message_id_or(s) == descriptor}
    assert {int.from_bytes(span.span_id, "big") for span in received} <= live

    # Each step is an event, in order, on the span it happened in.
    assert [e.name for e in root.events] == ["Enqueued"]
    assert [e.name for e in by_name["attempt 1"].events] == ["Claimed", "Failed"]
    assert [e.name for e in by_name["attempt 2"].events] == ["Claimed", "Succeeded"]
    events = sorted((e for span in received for e in span.events), key=lambda e: e.time_unix_nano)
    assert [(e.name, e.time_unix_nano) for e in events] == [
        (step["action"], step["at"] * 1_000_000) for step in steps
    ]
    failed = {a.key: a.value for a in by_name["attempt 1"].events[1].attributes}
    assert failed["pinledger.status_text"].string_value == "first try"
    assert failed["pinledger.verdict"].string_value == "applied"


def _received_spans(receiver: OtlpReceiver) -> list[tuple[str, ProtoSpan]]:
    return [
        (service, span)
        for request in list(receiver.requests)
        for rs in request.resource_spans
        for service in [
            next(
                (a.value.string_value for a in rs.resource.attributes if a.key == "service.name"),
                "",
            )
        ]
        for scope in rs.scope_spans
        for span in scope.spans
    ]


def test_a_server_exports_its_spans_over_otlp_when_asked(
    config: Config, prefix: str, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """`pinledger serve` with OTEL_EXPORTER_OTLP_ENDPOINT set: RPC spans reach the
    endpoint, and the dequeue response carries the enqueue's context."""
    schema = f"otl_{uuid.uuid4().hex[:10]}"
    settings = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "pinledger-otlp-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    process = ServerProcess(prefix=prefix, schema=schema, settings=settings)
    try:
        with running([process], tmp_path):
            client = process.client()
            queue = f"q_{uuid.uuid4().hex[:10]}"
            client.createQueue(context(), queue)
            client.enqueueJobs(
                context(),
                pinlater.PinLaterEnqueueRequest(
                    queueName=queue, jobs=[pinlater.PinLaterJob(body=b"x")]
                ),
            )
            answers: list[object] = []

            def dequeued() -> bool:
                answer = client.dequeueJobs(
                    context(), pinlater.PinLaterDequeueRequest(queueName=queue, limit=1)
                )
                if answer.jobs:
                    answers.append(answer)
                return bool(answer.jobs)

            wait_for(dequeued)
            client.close()

            def enqueue_span() -> tuple[str, ProtoSpan] | None:
                return next(
                    (
                        (service, span)
                        for service, span in _received_spans(receiver)
                        if span.name == "pinlater/enqueueJobs"
                    ),
                    None,
                )

            service, span = wait_for(enqueue_span)
    finally:
        Store(config.pg_dsn, schema).drop()
    assert service == "pinledger-otlp-test"
    (answer,) = answers
    ((descriptor, traceparent),) = answer.jobTraceparents.items()  # type: ignore[attr-defined]
    # The job's own trace, derived from the enqueue call's context.
    enqueue_tp = f"00-{span.trace_id.hex()}-{span.span_id.hex()}-01"
    assert traceparent.split("-")[1] == f"{job_trace.trace_id(enqueue_tp, descriptor):032x}"


def test_the_example_worker_traces_out_of_the_box(
    inproc: Server, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """The standard OTEL_* variables alone (no code) make the example worker export a
    `process <queue>` span per run, named for its service, as a child of the job's
    enqueue, with the job's descriptor."""
    queue = f"q_{uuid.uuid4().hex[:10]}"
    with PinLaterClient(f"127.0.0.1:{inproc.config.port}") as client:
        client.create_queue(queue)
        descriptors = client.enqueue(queue, thumbnail_jobs(3, delayed_s=0))
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pinledger.client.examples.thumbnail_worker",
            "--servers",
            f"127.0.0.1:{inproc.config.port}",
            "--queue",
            queue,
        ],
        cwd=tmp_path,
        env={
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def processed() -> list[ProtoSpan]:
            runs = [
                span
                for service, span in _received_spans(receiver)
                if service == "pinledger-worker" and span.name == f"process {queue}"
            ]
            return runs if _message_ids(runs) >= set(descriptors) else []

        runs = wait_for(processed, timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
        log.close()
    assert _message_ids(runs) == set(descriptors)
    assert all(span.parent_span_id for span in runs)  # children of their attempts


def _message_ids(spans: list[ProtoSpan]) -> set[str]:
    return {
        a.value.string_value
        for span in spans
        for a in span.attributes
        if a.key == "messaging.message.id"
    }


def test_a_failure_that_ends_a_job_is_an_error_on_the_servers_side(
    inproc: Server, spans: InMemorySpanExporter
) -> None:
    queue = f"q_{uuid.uuid4().hex[:10]}"
    with PinLaterClient(f"127.0.0.1:{inproc.config.port}") as client:
        client.create_queue(queue)
        (doomed,) = client.enqueue(queue, [Job(b"doomed", attempts_allowed=1)])
        _dequeue(client, queue, 1)
        client.ack(queue, failed=[Ack(doomed, "corrupt image", retry_delay_ms=0)])
        life = _wait_span(spans, f"job {doomed}", lambda s: True)
    assert life.status.status_code is StatusCode.ERROR
    assert life.status.description == "the job failed for good; last failed: corrupt image"
    assert (life.attributes or {})["messaging.message.id"] == doomed
    assert (life.attributes or {})["pinledger.final_state"] == "FAILED"
