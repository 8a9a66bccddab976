"""The live export of a traced job's life: which transitions end an attempt or the job,
the spans sent for them (the same as `pinledger trace --otlp` builds), the bounded
queue, and a store that is not there yet or fails."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pinledger.ledger.events import Actor, Claimed, Collected, Failed, JobEvent, Retried
from pinledger.ledger.state import Job, Stamp, evolve
from pinledger.projections.history import build_history
from pinledger.projections.projector import Transition
from pinledger.projections.store import EventRow
from pinledger.service.observability import job_trace, trace_export
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.live_traces import READS, Ended, LiveTraces, ended
from pinledger.service.testing.spans import captured_spans
from tests.unit.test_history import LOCAL_ID, STORY, D, rows_for

TRACED = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
UNSAMPLED = "00-" + "a" * 32 + "-" + "b" * 16 + "-00"


def transitions(steps: Sequence[tuple[int, str, JobEvent]]) -> list[Transition]:
    job: Job | None = None
    found = []
    for at, source, event in steps:
        before = job
        job, verdict = evolve(job, event, Stamp(at, Actor(source, "r", "s1")), LOCAL_ID)
        found.append(Transition(LOCAL_ID, event, before, job, verdict, at, None))
    return found


def _ended(upto: int, tp: str | None = TRACED) -> list[Ended]:
    """What the batch of STORY's step `upto - 1` ended."""
    batch = transitions(STORY[:upto])[upto - 1 :]
    return ended(D.queue, D.partition, batch, {LOCAL_ID: tp} if tp else {}, due=0.0)


def test_an_attempt_ends_with_a_failure_a_timeout_and_a_success() -> None:
    assert _ended(2) == []  # the claim starts an attempt
    (failed,) = _ended(3)
    assert (failed.descriptor, failed.claims, failed.job) == (D, frozenset({"c1"}), False)
    (timed_out,) = _ended(5)
    assert timed_out.claims == frozenset({"c2"})
    assert _ended(7) == []  # a stale ack, rejected: nothing ended
    (done,) = _ended(8)
    assert (done.claims, done.job) == (frozenset({"c3"}), True)


def test_garbage_collection_and_an_operators_retry_end_nothing() -> None:
    """A finished job's span went out at its end; collecting it later must not send a
    second version. An operator's retry of a FAILED job starts no attempt either."""
    story = [*STORY, (STORY[-1][0] + 1000, "pinledger:owner", Collected(LOCAL_ID))]
    batch = transitions(story)[-1:]
    assert batch[0].verdict.applied and batch[0].after is None
    assert ended(D.queue, D.partition, batch, {LOCAL_ID: TRACED}, due=0.0) == []
    doomed = [
        *STORY[:5],
        (STORY[4][0] + 100, "w", Claimed(LOCAL_ID, "c3")),
        (STORY[4][0] + 200, "w", Failed(LOCAL_ID, 0, "corrupt")),
        (STORY[4][0] + 300, "operator", Retried(LOCAL_ID, 1, STORY[4][0] + 300)),
    ]
    steps = transitions(doomed)
    assert steps[-2].after is not None and steps[-2].after.state.name == "FAILED"
    (failed,) = ended(D.queue, D.partition, steps[-2:-1], {LOCAL_ID: TRACED}, due=0.0)
    assert failed.job  # it failed for good: its span goes out
    assert steps[-1].verdict.applied and steps[-1].after is not None
    assert ended(D.queue, D.partition, steps[-1:], {LOCAL_ID: TRACED}, due=0.0) == []


def test_only_jobs_whose_enqueue_was_traced_and_sampled() -> None:
    assert _ended(8, tp=None) == []
    assert _ended(8, tp=UNSAMPLED) == []


@given(st.integers(min_value=1, max_value=len(STORY)))
def test_one_entry_per_job_per_batch(upto: int) -> None:
    """A batch holding several of a job's events gives one entry with every attempt it
    ended."""
    batch = transitions(STORY[:upto])
    found = ended(D.queue, D.partition, batch, {LOCAL_ID: TRACED}, due=0.0)
    want = {c for c, end in (("c1", 3), ("c2", 5), ("c3", 8)) if upto >= end}
    if want:
        (entry,) = found
        assert entry.claims == want
        assert entry.job == (upto == len(STORY))
    else:
        assert found == []


class Timeline:
    """Timeline rows the projection has committed so far (a store that may fail)."""

    def __init__(self) -> None:
        self.rows: list[EventRow] = []
        self.failing = False
        self.reads = 0

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        self.reads += 1
        if self.failing:
            raise ConnectionError("store down")
        return list(self.rows)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sent() -> Iterator[InMemorySpanExporter]:
    """The spans `otel.send` hands to this process's provider."""
    with captured_spans() as exporter:
        yield exporter


def _live(timeline: Timeline, clock: Clock, capacity: int = 100) -> tuple[LiveTraces, Metrics]:
    metrics = Metrics()
    return LiveTraces(timeline, metrics, capacity, threading.Event(), clock), metrics


def _observe(live: LiveTraces, upto: int) -> None:
    batch = transitions(STORY[:upto])[upto - 1 :]
    live.observe(D.queue, D.partition, batch, {LOCAL_ID: TRACED})


def _names(spans: Sequence[ReadableSpan]) -> list[str]:
    return [s.name for s in spans]


def test_each_attempt_goes_out_when_it_ends_and_the_job_when_it_ends(
    sent: InMemorySpanExporter,
) -> None:
    timeline, clock = Timeline(), Clock()
    live, metrics = _live(timeline, clock)
    for upto in range(1, len(STORY) + 1):
        timeline.rows = rows_for(STORY[:upto])  # committed
        _observe(live, upto)
        clock.now += 1
        live.run_once()
    assert _names(sent.get_finished_spans()) == [
        "attempt 1",
        "attempt 2",
        "job mail:s0:p1:5000",  # with the last attempt, as the job ends
        "attempt 3",
    ]
    # The same spans as the export after the fact: a viewer shows each once.
    whole = trace_export.build_spans(build_history(D, rows_for(STORY)))
    assert {(s.context.span_id, s.start_time, s.end_time, s.name) for s in whole} == {
        (s.context.span_id, s.start_time, s.end_time, s.name) for s in sent.get_finished_spans()
    }
    # Three sends: after the failure, after the timeout, at the end.
    assert metrics.snapshot_counter("pinledger_live_traces_total", outcome="exported") == 3


def test_a_history_not_committed_yet_is_read_again(sent: InMemorySpanExporter) -> None:
    timeline, clock = Timeline(), Clock()
    live, _ = _live(timeline, clock)
    timeline.rows = rows_for(STORY[:2])  # the failure is not committed yet
    _observe(live, 3)
    clock.now += 1
    live.run_once()
    assert sent.get_finished_spans() == ()
    timeline.rows = rows_for(STORY[:3])
    clock.now += 5
    live.run_once()
    assert _names(sent.get_finished_spans()) == ["attempt 1"]


def test_a_failing_store_is_retried_and_then_given_up(sent: InMemorySpanExporter) -> None:
    timeline, clock = Timeline(), Clock()
    live, metrics = _live(timeline, clock)
    timeline.failing = True
    _observe(live, 3)
    for _ in range(READS + 2):
        clock.now += 5
        live.run_once()  # never raises
    assert timeline.reads == READS
    assert sent.get_finished_spans() == ()
    assert metrics.snapshot_counter("pinledger_live_traces_total", outcome="gave_up") == 1


def test_the_queue_is_bounded(sent: InMemorySpanExporter) -> None:
    timeline, clock = Timeline(), Clock()
    live, metrics = _live(timeline, clock, capacity=1)
    _observe(live, 3)
    _observe(live, 5)
    assert metrics.snapshot_counter("pinledger_live_traces_total", outcome="dropped") == 1


def test_ids_handed_to_workers_are_the_attempts(sent: InMemorySpanExporter) -> None:
    """What a dequeue gives the worker is the context of the span the live export
    sends for that attempt: its processing nests inside."""
    timeline, clock = Timeline(), Clock()
    live, _ = _live(timeline, clock)
    timeline.rows = rows_for(STORY[:3])
    _observe(live, 3)
    live.drain()
    (attempt,) = sent.get_finished_spans()
    assert attempt.context is not None
    assert f"{attempt.context.span_id:016x}" in str(
        job_trace.attempt_traceparent(TRACED, str(D), "c1")
    )
