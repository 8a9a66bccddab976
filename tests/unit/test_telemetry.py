"""Tracing setup and helpers: when export is on, W3C traceparents, RPC attributes."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from pinledger import otel
from pinledger.idl import pinlater
from pinledger.service.api import dequeue, requests
from pinledger.service.observability import telemetry

TP = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_SERVICE_NAME": "pinledger-prod"}, False),
    ],
)
def test_export_is_off_unless_the_environment_asks(env: dict[str, str], wanted: bool) -> None:
    assert otel.wants_export(env) is wanted


def test_setup_without_export_installs_nothing() -> None:
    before = otel.active()
    assert otel.setup({}) is before


def test_traceparents_round_trip() -> None:
    ctx = telemetry.parse_traceparent(TP)
    assert ctx is not None
    assert ctx.trace_id == int("a" * 32, 16)
    assert ctx.span_id == int("b" * 16, 16)
    assert ctx.is_remote
    assert telemetry.format_traceparent(ctx) == TP


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "r1",
        "00-" + "0" * 32 + "-" + "b" * 16 + "-01",  # all-zero trace id
        "00-" + "a" * 32 + "-" + "0" * 16 + "-01",  # all-zero span id
        "01-" + "a" * 32 + "-" + "b" * 16 + "-01",  # unknown version
        "00-" + "a" * 31 + "-" + "b" * 16 + "-01",
    ],
)
def test_what_is_not_a_traceparent_gives_no_context(text: str | None) -> None:
    assert telemetry.parse_traceparent(text) is None


def test_no_current_span_means_no_traceparent() -> None:
    """Tracing off (or outside a span): nothing goes into the record headers."""
    assert telemetry.current_traceparent() is None
    assert telemetry.format_traceparent(SpanContext(0, 0, False, TraceFlags(0))) is None


def test_links_skip_missing_malformed_and_repeated_contexts() -> None:
    other = "00-" + "c" * 32 + "-" + "d" * 16 + "-00"
    found = telemetry.links([TP, None, "garbage", TP, other])
    assert [(link.context.trace_id, link.context.span_id) for link in found] == [
        (int("a" * 32, 16), int("b" * 16, 16)),
        (int("c" * 32, 16), int("d" * 16, 16)),
    ]


def test_links_are_capped() -> None:
    many = [f"00-{i + 1:032x}-{i + 1:016x}-01" for i in range(telemetry.MAX_LINKS + 10)]
    assert len(telemetry.links(many)) == telemetry.MAX_LINKS


def _context() -> object:
    return pinlater.RequestContext(source="worker:host", requestId="r-7")


def test_enqueue_attributes() -> None:
    request = pinlater.PinLaterEnqueueRequest(
        queueName="mail", jobs=[pinlater.PinLaterJob(body=b"a"), pinlater.PinLaterJob(body=b"b")]
    )
    response = pinlater.PinLaterEnqueueResponse(jobDescriptors=["d1", "d2"])
    assert telemetry.rpc_attributes("enqueueJobs", (_context(), request), response, "ok") == {
        "rpc.system": "apache_thrift",
        "rpc.service": "PinLater",
        "rpc.method": "enqueueJobs",
        "pinledger.error_code": "ok",
        "pinledger.request_id": "r-7",
        "pinledger.source": "worker:host",
        "pinledger.queue": "mail",
        "pinledger.jobs_in": 2,
        "pinledger.jobs_out": 2,
    }


def test_dequeue_with_piggybacked_acks_counts_acks_in_and_jobs_out() -> None:
    acks = pinlater.PinLaterJobAckRequest(
        queueName="mail",
        jobsSucceeded=[pinlater.PinLaterJobAckInfo(jobDescriptor="d1")],
        jobsFailed=[pinlater.PinLaterJobAckInfo(jobDescriptor="d2")],
    )
    request = pinlater.PinLaterDequeueRequest(queueName="mail", limit=5, jobAckRequest=acks)
    response = pinlater.PinLaterDequeueResponse(jobs={"d3": b"x"}, jobMetadata={})
    attrs = telemetry.rpc_attributes("dequeueJobs", (_context(), request), response, "ok")
    assert (attrs["pinledger.jobs_in"], attrs["pinledger.jobs_out"]) == (2, 1)


def test_failed_calls_and_queue_calls() -> None:
    attrs = telemetry.rpc_attributes("createQueue", (None, "mail"), None, "QUEUE_NOT_FOUND")
    assert attrs["pinledger.queue"] == "mail"
    assert attrs["pinledger.error_code"] == "QUEUE_NOT_FOUND"
    assert "pinledger.jobs_out" not in attrs
    assert "pinledger.request_id" not in attrs
    counted = telemetry.rpc_attributes("deleteJobs", (_context(), None), 12, "ok")
    assert counted["pinledger.jobs_out"] == 12


def test_no_span_is_started_while_tracing_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "active", lambda: False)
    assert telemetry.start_rpc("enqueueJobs", (_context(),)) is None


class _Peers:
    """Two peers answering a forwarded dequeue, one with trace contexts."""

    def __init__(self) -> None:
        self.answers = {
            "b:1": pinlater.PinLaterDequeueResponse(
                jobs={"q:s1:p1:1": b"b"}, jobMetadata={}, jobTraceparents={"q:s1:p1:1": TP}
            ),
            "c:1": pinlater.PinLaterDequeueResponse(jobs={"q:s2:p1:1": b"c"}, jobMetadata={}),
        }

    def dequeue(
        self, address: str, caller: object, request: object, limit: int, gone: object = None
    ) -> object:
        return self.answers[address]


class _Owner:
    def peers_for(self, queue: str) -> list[str]:
        return ["b:1", "c:1"]

    def is_peer(self, address: str) -> bool:
        return True


def test_forwarded_dequeues_keep_the_peers_trace_contexts() -> None:
    own = "q:s0:p1:1"
    response = pinlater.PinLaterDequeueResponse(
        jobs={own: b"a"}, jobMetadata={}, jobTraceparents={own: TP.replace("b", "c")}
    )
    request = requests.parse_dequeue(pinlater.PinLaterDequeueRequest(queueName="q", limit=3))
    caller = requests.parse_caller(_context())
    merged = dequeue.forward(_Owner(), _Peers(), response, caller, request)
    assert set(merged.jobs) == {own, "q:s1:p1:1", "q:s2:p1:1"}
    assert merged.jobTraceparents == {own: TP.replace("b", "c"), "q:s1:p1:1": TP}


def test_empty_polls_that_start_their_own_trace_are_not_exported() -> None:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        otel.Keeping(SimpleSpanProcessor(exported), telemetry.worth_keeping)
    )
    tracer = provider.get_tracer("test")

    def call(name: str, jobs_out: int, failed: bool = False) -> None:
        span = tracer.start_span(name)
        span.set_attribute("pinledger.jobs_out", jobs_out)
        if failed:
            span.set_status(Status(StatusCode.ERROR, "SHARD_CONNECTION_FAILED"))
        span.end()

    call("pinlater/dequeueJobs", 0)  # an idle queue's poll: not exported
    call("pinlater/dequeueOwned", 0)  # nor a peer's forwarded one
    call("pinlater/dequeueJobs", 3)
    call("pinlater/dequeueJobs", 0, failed=True)  # a failure is worth seeing
    call("pinlater/enqueueJobs", 0)
    with tracer.start_as_current_span("the caller's own"):
        call("pinlater/dequeueJobs", 0)  # inside a caller's trace: it asked for it
    provider.shutdown()
    assert [
        (span.name, (span.attributes or {}).get("pinledger.jobs_out"))
        for span in exported.get_finished_spans()
    ] == [
        ("pinlater/dequeueJobs", 3),
        ("pinlater/dequeueJobs", 0),
        ("pinlater/enqueueJobs", 0),
        ("pinlater/dequeueJobs", 0),
        ("the caller's own", None),
    ]
