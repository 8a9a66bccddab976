"""The time partitions of the timeline (job_events), as pure arithmetic: which day
partition holds an event, which partitions to create ahead of need, which a history
retention drops.

`job_events` is partitioned by range on `at` (epoch milliseconds), one partition per
UTC day, named `job_events_pYYYYMMDD`. A partition covers [start, start + DAY_MS). The
interval is fixed (not a setting): the partitions of one schema must never overlap,
and a changed interval would make new partitions overlap the old ones
(docs/decisions/0013-history-partitions.md).

Retention drops whole partitions only, never rows: a partition goes when its whole
range is older than the cut-off (`end <= cutoff`), so no event younger than the
retention is ever dropped, and an event older than it may stay up to a day longer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

DAY_MS = 86_400_000
PARTITION_PREFIX = "job_events_p"
# Partitions made ahead of the clock by the history maintenance, so the projector
# finds today's and tomorrow's in place and never waits on creating one.
DAYS_AHEAD = 2


@dataclass(frozen=True, slots=True, order=True)
class DayPartition:
    """One partition of job_events: the events with start <= at < end."""

    start: int
    end: int

    @property
    def name(self) -> str:
        return partition_name(self.start)


def day_start(at: int) -> int:
    """The start of the UTC day holding `at` (ms; floor division, so before 1970 too)."""
    return at // DAY_MS * DAY_MS


def partition_name(start: int) -> str:
    """The name of the day partition starting at `start`: job_events_pYYYYMMDD."""
    day = datetime.fromtimestamp(start / 1000, tz=UTC)
    return f"{PARTITION_PREFIX}{day:%Y%m%d}"


def day_partition(at: int) -> DayPartition:
    start = day_start(at)
    return DayPartition(start, start + DAY_MS)


def partitions_between(from_ms: int, to_ms: int) -> list[DayPartition]:
    """The day partitions covering [from_ms, to_ms), oldest first (none when empty)."""
    if to_ms <= from_ms:
        return []
    first, last = day_start(from_ms), day_start(to_ms - 1)
    return [DayPartition(s, s + DAY_MS) for s in range(first, last + DAY_MS, DAY_MS)]


def ahead_of(now: int, days: int = DAYS_AHEAD) -> tuple[int, int]:
    """The range [today's start, start of the day `days` after today) to have
    partitions for at `now`."""
    start = day_start(now)
    return start, start + (days + 1) * DAY_MS


def retention_cutoff(now: int, retention_days: float) -> int | None:
    """Events older than this (ms) are past the history retention; None: keep forever
    (a retention of 0)."""
    if retention_days <= 0:
        return None
    return now - round(retention_days * DAY_MS)


def to_drop(partitions: list[DayPartition], cutoff: int) -> list[DayPartition]:
    """The partitions whose whole range is older than `cutoff`, oldest first."""
    return sorted(p for p in partitions if p.end <= cutoff)
