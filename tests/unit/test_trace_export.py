"""A job's history as an OpenTelemetry trace: span tree, events, times, ids."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, StatusCode

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Claimed, Failed
from pinledger.projections.history import build_history
from pinledger.service.observability import job_trace, telemetry
from pinledger.service.observability.trace_export import (
    ExportError,
    build_spans,
    enqueue_traceparent,
    export,
    summary,
    trace_id_for,
)
from tests.unit.test_history import LOCAL_ID, STORY, T0, D, rows_for

MS = 1_000_000


def _ctx(span: ReadableSpan) -> SpanContext:
    ctx: SpanContext | None = span.context
    assert ctx is not None
    return ctx


def _spans(traced: bool = True, descriptor: JobDescriptor = D) -> list[ReadableSpan]:
    rows = rows_for(STORY)
    if not traced:
        rows = [r._replace(traceparent=None) for r in rows]
    return build_spans(build_history(descriptor, rows))


def test_one_root_for_the_life_and_one_child_per_attempt() -> None:
    root, *attempts = _spans()
    assert root.name == "job mail:s0:p1:5000"
    assert root.parent is None
    assert [a.name for a in attempts] == ["attempt 1", "attempt 2", "attempt 3"]
    for attempt in attempts:
        assert attempt.parent is not None
        assert attempt.parent.span_id == _ctx(root).span_id
        assert _ctx(attempt).trace_id == _ctx(root).trace_id
    assert (root.attributes or {})["pinledger.final_state"] == "SUCCEEDED"
    assert [(a.attributes or {})["pinledger.outcome"] for a in attempts] == [
        "failed",
        "timed out",
        "succeeded",
    ]


def test_every_step_is_an_event_on_the_span_it_happened_in() -> None:
    assert summary(_spans()) == [
        # The stale ack of the timed-out worker came after its attempt ended.
        ("job mail:s0:p1:5000", ["Enqueued", "Succeeded"]),
        ("attempt 1", ["Claimed", "Failed"]),
        ("attempt 2", ["Claimed", "TimedOut"]),
        ("attempt 3", ["Claimed", "Succeeded"]),
    ]
    events = sorted((e for s in _spans() for e in s.events), key=lambda e: e.timestamp)
    assert [e.name for e in events] == [type(event).__name__ for _, _, event in STORY]
    assert [e.timestamp for e in events] == [at * MS for at, _, _ in STORY]
    stale = _spans()[0].events[1].attributes or {}
    assert stale["pinledger.verdict"] == "rejected"
    assert stale["pinledger.source"] == "worker:host-2"
    assert "claimed by 'worker:host-3'" in str(stale["pinledger.reason"])


def test_spans_carry_the_ledgers_times_to_the_end_of_their_last_millisecond() -> None:
    """A span starts at the millisecond its first step was stamped with and ends at the
    end of the millisecond of its last: the worker's processing, timed in microseconds
    and acked within that millisecond, stays inside its attempt."""
    root, first, second, third = _spans()
    assert (root.start_time, root.end_time) == (T0 * MS, (T0 + 6001) * MS - 1)
    assert (first.start_time, first.end_time) == ((T0 + 150) * MS, (T0 + 401) * MS - 1)
    assert (second.start_time, second.end_time) == ((T0 + 1500) * MS, (T0 + 5501) * MS - 1)
    assert (first.attributes or {})["pinledger.retry_delay_ms"] == 1000
    assert (first.attributes or {})["pinledger.queued_ms"] == 50
    assert (second.attributes or {})["pinledger.timeout_lost_ms"] == 4000
    for span in (first, second, third):
        assert span.start_time is not None and span.end_time is not None
        assert (root.start_time or 0) <= span.start_time <= span.end_time <= (root.end_time or 0)


def test_failed_attempts_are_errors_that_say_why() -> None:
    root, first, second, third = _spans()
    assert first.status.status_code == StatusCode.ERROR
    assert first.status.description == "failed: boom"  # the worker's message
    assert second.status.status_code == StatusCode.ERROR
    assert str(second.status.description).startswith("timed out")
    assert third.status.status_code != StatusCode.ERROR
    assert root.status.status_code != StatusCode.ERROR  # it succeeded in the end


def test_a_job_that_failed_for_good_is_an_error_with_the_last_failure() -> None:
    story = [
        *STORY[:5],
        (T0 + 5600, "w", Claimed(LOCAL_ID, "c3")),
        (T0 + 5700, "w", Failed(LOCAL_ID, 0, "corrupt")),
    ]
    root, *attempts = build_spans(build_history(D, rows_for(story)))
    assert [a.status.status_code for a in attempts] == [StatusCode.ERROR] * 3
    assert root.status.status_code == StatusCode.ERROR
    assert root.status.description == "the job failed for good; last failed: corrupt"
    assert (root.attributes or {})["pinledger.final_state"] == "FAILED"


def test_spans_follow_the_messaging_conventions() -> None:
    for span in _spans():
        attributes = span.attributes or {}
        assert attributes["messaging.system"] == "pinledger"
        assert attributes["messaging.destination.name"] == "mail"
        assert attributes["messaging.message.id"] == "mail:s0:p1:5000"
        assert attributes["pinledger.descriptor"] == "mail:s0:p1:5000"


def test_each_job_is_a_trace_of_its_own_linked_to_its_enqueue_call() -> None:
    root, *_ = _spans()
    enqueue = SpanContext(int("a" * 32, 16), int("b" * 16, 16), is_remote=True)
    assert _ctx(root).trace_id not in (0, enqueue.trace_id)
    assert [(link.context.trace_id, link.context.span_id) for link in root.links] == [
        (enqueue.trace_id, enqueue.span_id)
    ]
    other = _spans(descriptor=dataclasses.replace(D, local_id=D.local_id + 1))
    assert _ctx(other[0]).trace_id != _ctx(root).trace_id  # same call, another trace


def test_ids_are_what_the_server_handed_out_live() -> None:
    """The job's span and each attempt's have the ids the server derived when it
    claimed: the worker's processing nests in the attempt the export draws."""
    history = build_history(D, rows_for(STORY))
    root, *attempts = build_spans(history)
    enqueue_tp = enqueue_traceparent(history)
    assert telemetry.format_traceparent(_ctx(root)) == job_trace.job_traceparent(enqueue_tp, str(D))
    for attempt, claim in zip(attempts, ["c1", "c2", "c3"], strict=True):
        assert telemetry.format_traceparent(_ctx(attempt)) == job_trace.attempt_traceparent(
            enqueue_tp, str(D), claim
        )


def test_without_a_traceparent_ids_come_from_the_descriptor() -> None:
    first = _spans(traced=False)
    again = _spans(traced=False)
    other = _spans(traced=False, descriptor=dataclasses.replace(D, local_id=D.local_id + 1))
    assert first[0].parent is None
    assert [_ctx(s) for s in first] == [_ctx(s) for s in again]
    assert _ctx(first[0]).trace_id != _ctx(other[0]).trace_id
    assert len({_ctx(s).span_id for s in first}) == 4
    history = build_history(D, [r._replace(traceparent=None) for r in rows_for(STORY)])
    assert trace_id_for(history) == _ctx(first[0]).trace_id


def test_a_job_without_history_is_refused() -> None:
    with pytest.raises(ValueError, match="no history"):
        build_spans(build_history(D, []))


def test_export_sends_the_spans_in_one_batch() -> None:
    sent = InMemorySpanExporter()
    spans = export(build_history(D, rows_for(STORY)), sent)
    assert summary(sent.get_finished_spans()) == summary(spans)


class _Refusing(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE


def test_an_endpoint_that_refuses_is_an_error() -> None:
    with pytest.raises(ExportError, match="did not take the trace"):
        export(build_history(D, rows_for(STORY)), _Refusing())


def test_two_builds_are_the_same_spans_for_a_viewer() -> None:
    """The live export and a later `--otlp` build the spans apart: everything a viewer
    compares, the resource included, must be equal (it would show two copies)."""
    first, again = _spans(), _spans()
    assert [(s.resource.attributes, s.attributes, s.start_time, s.end_time) for s in first] == [
        (s.resource.attributes, s.attributes, s.start_time, s.end_time) for s in again
    ]
    assert first[0].resource.attributes["service.instance.id"] == "ledger"
