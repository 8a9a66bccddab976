"""Trace spans of the owner's actions on jobs: the claims and timeouts it appends, and
the acks, checkpoints, retries and deletes the ledger rejected. Each links to the
traces of the jobs it acted on (job_trace.py; the owner keeps their enqueue contexts in
memory)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pinledger import otel
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Checkpointed, Deleted, Failed, Retried, Succeeded
from pinledger.projections.projector import Transition
from pinledger.service.observability import job_trace, telemetry

# Events whose rejection gets a span linking to the jobs (claims and timeouts have
# theirs where the owner appends them).
_APPLY_SPAN_EVENTS = (Succeeded, Failed, Checkpointed, Retried, Deleted)


def naming(jobs: Sequence[JobDescriptor]) -> dict[str, Any]:
    """Attributes that say which jobs a span acted on, searchable in a viewer: their
    descriptors (at most MAX_LINKS, as the links), and `messaging.message.id` when it
    is one job."""
    attributes: dict[str, Any] = {
        "pinledger.descriptors": [str(job) for job in jobs[: telemetry.MAX_LINKS]]
    }
    if len(jobs) == 1:
        attributes["messaging.message.id"] = str(jobs[0])
    return attributes


@contextmanager
def job_span(
    name: str,
    traceparents: Iterable[str | None],
    attributes: Callable[[], Mapping[str, Any]],
    root: bool = False,
) -> Iterator[str | None]:
    """A span around an append on jobs, when tracing is on: yields its traceparent (for
    the appended records), or None when tracing is off (`traceparents` and
    `attributes` are then never read: a claim on the hot path pays nothing for them).
    The span ends when the block does, whether the append failed or not."""
    if not otel.active():
        yield None
        return
    span = telemetry.start_job_span(name, traceparents, attributes(), root=root)
    try:
        yield telemetry.format_traceparent(span.get_span_context())
    finally:
        span.end()


def rejected_spans(
    queue: str, partition: int, transitions: Sequence[Transition], traceparents: dict[int, str]
) -> None:
    """A root span for the acks, checkpoints, retries and deletes the ledger rejected in
    a batch (a stale ack from a worker whose claim timed out, an ack of a finished job),
    one per call that appended them: it links to that call and to each job's trace, and
    says how many of each were rejected and why. What was applied is drawn on the jobs'
    own traces (live_traces.py); a root span, since the owner applies an event after the
    call that appended it has ended, outside its time."""
    groups: dict[str | None, list[Transition]] = {}
    for t in transitions:
        if not t.verdict.applied and isinstance(t.event, _APPLY_SPAN_EVENTS):
            groups.setdefault(t.traceparent, []).append(t)
    for call, group in groups.items():
        attributes: dict[str, Any] = {
            "pinledger.queue": queue,
            "pinledger.partition": partition,
            "pinledger.reason": group[0].verdict.reason,
        }
        for t in group:
            name = f"pinledger.{type(t.event).__name__.lower()}.rejected"
            attributes[name] = int(attributes.get(name, 0)) + 1
        jobs = [_descriptor(queue, partition, t) for t in group]
        attributes.update(naming(jobs))
        contexts = [call] + [
            job_trace.job_traceparent(traceparents.get(t.local_id), str(d))
            for t, d in zip(group, jobs, strict=True)
        ]
        telemetry.start_job_span(
            f"pinledger rejected {queue}", contexts, attributes, root=True
        ).end()


def _descriptor(queue: str, partition: int, t: Transition) -> JobDescriptor:
    job = t.after or t.before
    priority = job.priority if job is not None else 0
    return JobDescriptor(queue, partition, priority, t.local_id)
