"""One timeline row (job_events) per event that named a job, as `evolve` judged it:
written by the projector (projections/projector.py) and rebuilt, for a job whose rows
the history retention dropped, from the log (projections/log_history.py). One
function, so both say the same."""

from __future__ import annotations

import dataclasses
from typing import Any

from pinledger.ledger import codec
from pinledger.ledger.events import Envelope, JobEvent
from pinledger.ledger.state import Job, Stamp, Verdict, event_local_id, evolve
from pinledger.projections.store import EventRow

# dataclasses.fields() per event cost ~8% of a replay (py-spy, docs/performance-history.md).
_DETAIL_FIELDS: dict[type, tuple[str, ...]] = {}


def _detail_fields(event: JobEvent) -> tuple[str, ...]:
    names = _DETAIL_FIELDS.get(type(event))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(event) if f.name != "local_id")
        _DETAIL_FIELDS[type(event)] = names
    return names


# Fields left out at their default, so that the rows of events written before the field
# existed stay as they were (a replay compares them with the live rows).
_OMITTED_AT_DEFAULT: dict[str, object] = {"unique_for_ms": 0}
_NO_DEFAULT = object()


def _detail(event: JobEvent) -> dict[str, Any]:
    """The event's own fields for the timeline; bodies are summarised by their size."""
    detail: dict[str, Any] = {}
    for name in _detail_fields(event):
        value = getattr(event, name)
        if isinstance(value, bytes):
            detail[f"{name}_bytes"] = len(value)
        elif value is not None and _OMITTED_AT_DEFAULT.get(name, _NO_DEFAULT) != value:
            detail[name] = value
    return detail


def timeline_row(
    local_id: int,
    offset: int,
    idx: int,
    envelope: Envelope,
    event: JobEvent,
    prior: Job | None,
    after: Job | None,
    verdict: Verdict,
    traceparent: str | None = None,
    held_by: Job | None = None,
) -> EventRow:
    """The timeline row of one event as `evolve` judged it (`prior` -> `after`): what
    the projector writes to job_events, and what a history read from the log
    (projections/log_history.py) rebuilds, so both say the same. `held_by` is the job
    whose key turned a keyed enqueue away: its id is in the row's detail, where the
    enqueuing server reads which job to answer (service/api/unique.py)."""
    claim = getattr(event, "claim", None) or (prior.claim if prior else None)
    actor = envelope.actor
    detail = _detail(event)
    if held_by is not None:
        detail["held_by"] = held_by.local_id
    # Positional, in EventRow's field order: a third of the cost of keywords, once per
    # event of every fold (docs/performance-history.md, "The fold's objects").
    return EventRow(
        local_id,
        offset,
        idx,
        codec.tag_of(event),  # type
        envelope.at,
        actor.source,
        actor.request_id,
        actor.server,
        claim,
        verdict.applied,
        str(verdict),
        None if after is None else int(after.state),  # state_after
        None if after is None else after.attempts_remaining,
        detail,
        traceparent,
    )


def turned_away_row(
    holder: Job,
    offset: int,
    idx: int,
    envelope: Envelope,
    event: JobEvent,
    traceparent: str | None = None,
) -> EventRow:
    """The holder's copy of a keyed enqueue its key turned away (decision 0037): the
    same event in the holder's timeline, with the verdict the enqueue had (judged here,
    from the event alone: it creates nothing whatever a fold knows of its id), against
    the holder (which it left as it was), so that the holder's history and `pinledger
    trace` list the enqueues its key turned away. Every fold that writes the turned-away
    row writes this one too (the projector, the verify's fold, the history from the
    log)."""
    stamp = Stamp(envelope.at, envelope.actor)
    _, verdict = evolve(None, event, stamp, event_local_id(event, offset, idx), holder)
    return timeline_row(
        holder.local_id, offset, idx, envelope, event, holder, holder, verdict, traceparent, holder
    )
