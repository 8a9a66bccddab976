"""The day partitions of job_events on MariaDB: listed, created, dropped whole by the
retention (the store's cache of them and its retry: projections/sql/day_partitions.py).

MariaDB's RANGE partitions have upper bounds only: a partition holds the rows from the
bound of the one before it (or from minus infinity, for the first) up to its own. To
keep Postgres's model of separate day ranges (docs/decisions/0013-history-partitions.md)
the table alternates two kinds (docs/decisions/0016-mysql-store.md):

- a day partition `job_events_pYYYYMMDD` ends at its day's end, and the partition
  before it ends at its day's start, so it holds exactly its day;
- a gap partition `job_events_gYYYYMMDD` ends at the start of the day it names and
  holds the time before it down to the partition before it. Gaps hold no rows as long
  as every row is written after its day's partition exists (what the store does), so
  splitting one around a new day copies nothing. The first partition is always a gap.

A time above the last bound has no partition (MariaDB refuses the row, as Postgres does
a row outside every partition), so a store that forgot a dropped day finds out and
creates it again. Which days and when is pure arithmetic (projections/
day_partitions.py); the plan of each DDL is `plan_*` below, the DDL runs here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

import pymysql.cursors

from pinledger.projections.day_partitions import (
    DAY_MS,
    PARTITION_PREFIX,
    DayPartition,
)
from pinledger.projections.mysql.connection import (
    ER_NO_PARTITION_FOR_GIVEN_VALUE,
    MyConnection,
    error_code,
)
from pinledger.projections.mysql.sql import fragment, query, quote
from pinledger.projections.store import StoreError

GAP_PREFIX = "job_events_g"


class Part(NamedTuple):
    """One MariaDB partition of job_events: its name and upper bound (exclusive)."""

    name: str
    bound: int

    @property
    def is_day(self) -> bool:
        return self.name.startswith(PARTITION_PREFIX)

    @property
    def day(self) -> DayPartition:
        return DayPartition(self.bound - DAY_MS, self.bound)


def gap(bound: int) -> Part:
    day = datetime.fromtimestamp(bound / 1000, tz=UTC)
    return Part(f"{GAP_PREFIX}{day:%Y%m%d}", bound)


def day_part(day: DayPartition) -> Part:
    return Part(day.name, day.end)


class Split(NamedTuple):
    """REORGANIZE `partition` INTO `into` (a gap made room for a day)."""

    partition: str
    into: list[Part]


def plan_creation(
    parts: list[Part], wanted: Iterable[DayPartition]
) -> tuple[list[Split], list[Part]]:
    """The splits of gaps (in order) and the partitions to add above the last bound that
    give every wanted day its partition, given the partitions in order."""
    current = list(parts)
    present = {p.day for p in current if p.is_day}
    splits: list[Split] = []
    added: list[Part] = []
    for day in sorted(set(wanted) - present):
        top = current[-1].bound
        if day.start >= top:
            if day.start > top:
                added.append(gap(day.start))
            added.append(day_part(day))
            current.extend(added[-2:] if day.start > top else added[-1:])
            continue
        i = next(i for i, p in enumerate(current) if p.bound > day.start)
        holder = current[i]
        if holder.is_day:
            raise StoreError(
                f"job_events partition {holder.name} (up to {holder.bound}) overlaps day "
                f"{day.name}: the partitions are not as this store makes them"
            )
        low = current[i - 1].bound if i > 0 else None
        into = [gap(day.start)] if low is None or low < day.start else []
        into.append(day_part(day))
        if day.end < holder.bound:
            into.append(holder)
        splits.append(Split(holder.name, into))
        current[i : i + 1] = into
    return splits, added


def plan_drop(parts: list[Part], cutoff: int) -> tuple[list[Part], Part | None]:
    """The partitions a retention at `cutoff` removes (those whose whole range ends at
    or before it) and, of them, the one kept, emptied, as the new first gap: MariaDB
    would otherwise stretch the next day partition down to minus infinity. (None: no
    day partition is old enough, nothing to do.)"""
    old = [p for p in parts if p.bound <= cutoff]
    if not any(p.is_day for p in old):
        return [], None
    return old[:-1], old[-1]


def _definitions(parts: list[Part]) -> str:
    return ", ".join(
        fragment("partition_definition", partition=quote(p.name), bound=str(int(p.bound)))
        for p in parts
    )


class MyDayPartitions(MyConnection):
    def missing_partition(self, exc: StoreError) -> bool:
        """Whether a write failed because no partition of job_events takes a row."""
        return error_code(exc.__cause__ or exc) == ER_NO_PARTITION_FOR_GIVEN_VALUE

    def _parts(self, cur: pymysql.cursors.Cursor) -> list[Part]:
        cur.execute(query("day_partitions"), {})
        return [Part(str(name), int(bound)) for name, bound in cur.fetchall()]

    def day_partitions(self) -> list[DayPartition]:
        with self.cursor("listing the timeline's day partitions") as cur:
            parts = self._parts(cur)
        return sorted(p.day for p in parts if p.is_day)

    def create_day_partitions(self, wanted: list[DayPartition]) -> tuple[int, set[DayPartition]]:
        """Split gaps and add partitions so every wanted day has its own; (how many days
        created, the days present after)."""
        with self.cursor("creating the timeline's day partitions") as cur, self._ddl_lock(cur):
            parts = self._parts(cur)
            splits, added = plan_creation(parts, wanted)
            for split in splits:
                cur.execute(
                    query("split_day_partition", partition=split.partition).replace(
                        "{definitions}", _definitions(split.into)
                    )
                )
            if added:
                cur.execute(
                    query("add_day_partitions").replace("{definitions}", _definitions(added))
                )
            present = {p.day for p in self._parts(cur) if p.is_day}
        created = len(splits) + sum(1 for p in added if p.is_day)
        return created, present

    def drop_day_partitions_before(self, cutoff: int) -> int:
        """Drop every day partition whose whole range is older than `cutoff` (whole
        partitions, never a DELETE: the newest of them is truncated and becomes the
        first gap, the others are dropped); the number of days dropped."""
        with self.cursor("listing the timeline's day partitions") as cur:
            dropped, kept = plan_drop(self._parts(cur), cutoff)
        if kept is None:
            return 0
        with self.cursor("dropping the timeline's day partitions") as cur, self._ddl_lock(cur):
            # Planned again under the lock: another process may have dropped them.
            dropped, kept = plan_drop(self._parts(cur), cutoff)
            if kept is None:
                return 0
            cur.execute(query("truncate_day_partition", partition=kept.name))
            if dropped:
                names = ", ".join(quote(p.name) for p in dropped)
                cur.execute(query("drop_day_partitions").replace("{partitions}", names))
            if kept.is_day:
                floor = gap(kept.bound)
                cur.execute(
                    query("split_day_partition", partition=kept.name).replace(
                        "{definitions}", _definitions([floor])
                    )
                )
        return sum(1 for p in [*dropped, kept] if p.is_day)

    class _Lock:
        def __init__(self, cur: pymysql.cursors.Cursor) -> None:
            self.cur = cur

        def __enter__(self) -> None:
            self.cur.execute(query("day_partitions_lock_timeout"))
            self.cur.execute(query("lock_day_partitions"))
            row = self.cur.fetchone()
            if not row or row[0] != 1:
                self.cur.execute(query("default_lock_timeout"))
                raise StoreError("another process is changing job_events' partitions")

        def __exit__(self, *_: object) -> None:
            self.cur.execute(query("unlock_day_partitions"))
            self.cur.execute(query("default_lock_timeout"))

    def _ddl_lock(self, cur: pymysql.cursors.Cursor) -> MyDayPartitions._Lock:
        """Changing partitions takes turns between processes (a named lock) and waits
        at most 5 s for job_events' metadata lock."""
        return MyDayPartitions._Lock(cur)
