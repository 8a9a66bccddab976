"""The queues the catalog's events describe, folded in memory: what the catalog
projector writes into the `queues` table (projector.py), for those that read the
catalog from the log themselves (verify, `pinledger queue resize`). The first creation
of a name stands until its deletion; a resize only ever adds partitions, and says how
many of them take new jobs."""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping

from pinledger.ledger.events import Event, QueueCreated, QueueDeleted, QueueResized
from pinledger.projections.store import QueueRow


def fold_queue_event(queues: MutableMapping[str, QueueRow], event: Event, at: int) -> None:
    if isinstance(event, QueueCreated):
        queues.setdefault(event.name, QueueRow(event.name, event.partitions, at))
    elif isinstance(event, QueueResized):
        row = queues.get(event.name)
        if row is not None:
            queues[event.name] = dataclasses.replace(
                row,
                partitions=max(row.partitions, event.partitions),
                open_partitions=event.partitions,
            )
    elif isinstance(event, QueueDeleted):
        queues.pop(event.name, None)
