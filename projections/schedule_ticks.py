"""The latest tick of each periodic job's schedule (`ScheduleTicked` in the catalog,
decision 0038), folded in memory: what the catalog projector writes into the
`schedule_ticks` table (the stores' `record_tick` statement says the same), for what
reads the catalog from the log itself (the verify, the golden corpus) and for the fake
store.

A tick counts only for a queue the catalog has when it comes (as a pause: a tick of a
queue never created, or deleted, records nothing); a schedule's latest tick stands, so a
record with an earlier or equal `tick_ms` changes nothing (two catalog owners of a
failover that both record a tick leave the first); a queue's deletion drops its
schedules' ticks, and so does its creation (a queue created under the name starts with
none, as the store's creation clears what it holds under the name)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from pinledger.ledger.events import Envelope, Event, QueueCreated, QueueDeleted, ScheduleTicked
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.store import QueueRow, ScheduleTick

# (queue, schedule) -> its latest tick.
Ticks = MutableMapping[tuple[str, str], ScheduleTick]


def record(ticks: Ticks, tick: ScheduleTick) -> None:
    """Record `tick` unless its schedule's tick held is as late or later (the queue is
    the caller's to check)."""
    key = (tick.queue, tick.schedule)
    held = ticks.get(key)
    if held is None or held.tick_ms < tick.tick_ms:
        ticks[key] = tick


def fold_tick(ticks: Ticks, queues: Mapping[str, QueueRow], event: Event, at: int) -> None:
    """Fold one catalog event of a record at `at` into `ticks`, given the queues as
    folded before it (call before `fold_queue_event` of the same event)."""
    if isinstance(event, ScheduleTicked):
        if event.name in queues:
            record(ticks, ScheduleTick(event.name, event.schedule, event.tick_ms, event.job, at))
    elif isinstance(event, QueueCreated | QueueDeleted):
        forget_queue(ticks, event.name)


def forget_queue(ticks: Ticks, name: str) -> None:
    """Drop the ticks of every schedule of the queue."""
    for key in [key for key in ticks if key[0] == name]:
        del ticks[key]


def ticks_of(envelopes: Iterable[Envelope]) -> list[ScheduleTick]:
    """The ticks the catalog's envelopes leave, by queue and schedule name."""
    queues: dict[str, QueueRow] = {}
    ticks: dict[tuple[str, str], ScheduleTick] = {}
    for envelope in envelopes:
        for event in envelope.events:
            fold_tick(ticks, queues, event, envelope.at)
            fold_queue_event(queues, event, envelope.at)
    return [ticks[key] for key in sorted(ticks)]
