"""Trace spans of the owner's actions on jobs: the claims and timeouts it appends, and
the acks, checkpoints, retries and deletes its projection applied. Each links to the
enqueue context of the jobs it acted on (the owner keeps those in memory)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pinledger import otel
from pinledger.ledger.events import Checkpointed, Deleted, Failed, Retried, Succeeded
from pinledger.projections.projector import Transition
from pinledger.service.observability import telemetry

# Events whose application gets a span linking to the jobs' enqueues (claims and
# timeouts have theirs where the owner appends them).
_APPLY_SPAN_EVENTS = (Succeeded, Failed, Checkpointed, Retried, Deleted)


@contextmanager
def job_span(
    name: str,
    traceparents: Iterable[str | None],
    attributes: Mapping[str, Any],
    root: bool = False,
) -> Iterator[str | None]:
    """A span around an append on jobs, when tracing is on: yields its traceparent (for
    the appended records), or None when tracing is off (`traceparents` is then never
    read). The span ends when the block does, whether the append failed or not."""
    if not otel.active():
        yield None
        return
    span = telemetry.start_job_span(name, traceparents, attributes, root=root)
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
        attributes: dict[str, int | str] = {
            "pinledger.queue": queue,
            "pinledger.partition": partition,
        }
        for t in group:
            name = f"pinledger.{type(t.event).__name__.lower()}." + (
                "applied" if t.verdict.applied else "rejected"
            )
            attributes[name] = int(attributes.get(name, 0)) + 1
        span = telemetry.start_job_span(
            f"pinledger apply {queue}",
            (traceparents.get(t.local_id) for t in group),
            attributes,
            parent=parent,
            root=True,
        )
        span.end()
