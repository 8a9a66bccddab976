"""The timeline's day partitions as the store keeps them (projections/day_partitions.py
says which days, the dialect runs the DDL): listed, created ahead of need and before
the first event of a day is written, dropped whole by the retention."""

from __future__ import annotations

from collections.abc import Iterable

from pinledger.projections.day_partitions import DayPartition, day_partition, partitions_between
from pinledger.projections.sql.base import SqlBase


class SqlDayPartitions(SqlBase):
    # The days this process has seen in place: a batch whose days are all known costs
    # no query. A cache: a write that finds one gone clears it (SqlWrites).
    _known_partitions: set[DayPartition] | None = None

    def day_partitions(self) -> list[DayPartition]:
        """The partitions of job_events, oldest first."""
        return self.dialect.day_partitions()

    def ensure_day_partitions(self, from_ms: int, to_ms: int) -> int:
        """Make sure a partition holds every time in [from_ms, to_ms); the number
        created."""
        return self._ensure(partitions_between(from_ms, to_ms))

    def ensure_day_partitions_for(self, times: Iterable[int]) -> None:
        """Make sure the partitions of these event times exist before they are written
        (a no-op, without a query, for days this process has seen already)."""
        # A batch's events share a few times (one per record): dedupe the ints first.
        wanted = {day_partition(at) for at in set(times)}
        known = self._known_partitions
        if known is not None and wanted <= known:
            return
        self._ensure(sorted(wanted))

    def forget_day_partitions(self) -> None:
        self._known_partitions = None

    def _ensure(self, wanted: list[DayPartition]) -> int:
        if not wanted:
            return 0
        created, present = self.dialect.create_day_partitions(wanted)
        self._known_partitions = present
        return created

    def drop_day_partitions_before(self, cutoff: int) -> int:
        """Drop every partition whose whole range is older than `cutoff` (whole
        partitions, never a DELETE); the number of days dropped."""
        self.forget_day_partitions()
        return self.dialect.drop_day_partitions_before(cutoff)
