"""Trace spans of the owner's actions on jobs: the claims and timeouts it appends, and
the acks, checkpoints, retries and deletes its projection applied. Each links to the
enqueue context of the jobs it acted on (the owner keeps those in memory)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Status, StatusCode

from pinledger import otel
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Checkpointed, Deleted, Failed, Retried, Succeeded
from pinledger.ledger.state import JobState
from pinledger.projections.projector import Transition
from pinledger.service.observability import telemetry

# Events whose application gets a span linking to the jobs' enqueues (claims and
# timeouts have theirs where the owner appends them).
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


def apply_spans(
    queue: str, partition: int, transitions: Sequence[Transition], traceparents: dict[int, str]
) -> None:
    """One span per record's trace context for the acks, checkpoints, retries and
    deletes a batch applied: a child of the call that appended them (when it was
    traced), linking to each job's enqueue context, with counts of applied and
    rejected events."""
    groups: dict[str | None, list[Transition]] = {}
    for t in transitions:
        if isinstance(t.event, _APPLY_SPAN_EVENTS):
            groups.setdefault(t.traceparent, []).append(t)
    for parent, group in groups.items():
        attributes: dict[str, Any] = {
            "pinledger.queue": queue,
            "pinledger.partition": partition,
        }
        for t in group:
            name = f"pinledger.{type(t.event).__name__.lower()}." + (
                "applied" if t.verdict.applied else "rejected"
            )
            attributes[name] = int(attributes.get(name, 0)) + 1
        attributes.update(naming([_descriptor(queue, partition, t) for t in group]))
        span = telemetry.start_job_span(
            f"pinledger apply {queue}",
            (traceparents.get(t.local_id) for t in group),
            attributes,
            parent=parent,
            root=True,
        )
        ended = [t for t in group if _failed_for_good(t)]
        if ended:
            # A failure that ends a job is an error on the server's side too.
            span.set_status(
                Status(
                    StatusCode.ERROR,
                    f"{len(ended)} job(s) failed for good, the first "
                    f"{_descriptor(queue, partition, ended[0])}",
                )
            )
        span.end()


def _descriptor(queue: str, partition: int, t: Transition) -> JobDescriptor:
    job = t.after or t.before
    priority = job.priority if job is not None else 0
    return JobDescriptor(queue, partition, priority, t.local_id)


def _failed_for_good(t: Transition) -> bool:
    return (
        isinstance(t.event, Failed)
        and t.verdict.applied
        and t.after is not None
        and t.after.state is JobState.FAILED
    )
