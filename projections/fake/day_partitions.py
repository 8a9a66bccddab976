"""FakeStore's timeline partitions: the day partitions job_events has on Postgres
(projections/pg/day_partitions.py), kept as a set of ranges over the fake's event rows."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import TypeVar

from pinledger.projections.day_partitions import (
    DayPartition,
    day_partition,
    partitions_between,
    to_drop,
)
from pinledger.projections.store import EventRow

K = TypeVar("K")


class FakeDayPartitions:
    def __init__(self) -> None:
        self.parts: set[DayPartition] = set()

    def listed(self) -> list[DayPartition]:
        return sorted(self.parts)

    def ensure(self, wanted: Iterable[DayPartition]) -> int:
        new = set(wanted) - self.parts
        self.parts |= new
        return len(new)

    def ensure_between(self, from_ms: int, to_ms: int) -> int:
        return self.ensure(partitions_between(from_ms, to_ms))

    def ensure_for(self, rows: Iterable[EventRow]) -> None:
        self.ensure(day_partition(row.at) for row in rows)

    def drop_before(self, cutoff: int, events: MutableMapping[K, EventRow]) -> int:
        """Drop the partitions older than `cutoff` with the events in them."""
        old = to_drop(list(self.parts), cutoff)
        for part in old:
            self.parts.discard(part)
        gone = [k for k, row in events.items() if day_partition(row.at) in old]
        for key in gone:
            del events[key]
        return len(old)
