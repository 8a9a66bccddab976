"""The day partitions of job_events on Postgres: listed, created, dropped whole by the
retention (the store's cache of them and its retry: projections/sql/day_partitions.py).

Which partitions and when is pure arithmetic (projections/day_partitions.py); this
runs the DDL. Creating takes an advisory lock so two processes do not create the same
day at once; both creating and dropping hold job_events' weaker locks only (ATTACH,
DETACH ... CONCURRENTLY), so the timeline's readers and the projector's inserts keep
going meanwhile.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import sql

from pinledger.projections.day_partitions import DayPartition, to_drop
from pinledger.projections.pg.connection import PgConnection
from pinledger.projections.pg.sql import query
from pinledger.projections.store import StoreError

# How Postgres prints a range partition's bound over a bigint column.
_BOUND = re.compile(r"FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)")


def _statement(name: str, part: DayPartition) -> sql.Composed:
    """A DDL statement on one partition: DDL takes no bind parameters, so the bounds
    (integers) are composed as literals and the name as an identifier."""
    return query(name).format(
        partition=sql.Identifier(part.name),
        start=sql.Literal(part.start),
        end=sql.Literal(part.end),
    )


def _parse_bound(name: str, bound: str) -> DayPartition:
    found = _BOUND.search(bound)
    if found is None:
        raise StoreError(f"job_events partition {name} has an unexpected bound: {bound}")
    return DayPartition(int(found.group(1)), int(found.group(2)))


class PgDayPartitions(PgConnection):
    def missing_partition(self, exc: StoreError) -> bool:
        """Whether a write failed because no partition of job_events takes a row (one
        was dropped after this process last saw it)."""
        cause = exc.__cause__
        return isinstance(cause, psycopg.errors.CheckViolation) and "no partition" in str(cause)

    def day_partitions(self) -> list[DayPartition]:
        with self.connection("listing the timeline's day partitions") as conn:
            found = conn.execute(query("day_partitions")).fetchall()
        return sorted(_parse_bound(name, bound) for name, bound, _ in found)

    def create_day_partitions(self, wanted: list[DayPartition]) -> tuple[int, set[DayPartition]]:
        """Create the missing ones under an advisory lock (two processes never create
        the same day at once); (how many created, the days present after)."""
        created = 0
        with self.connection("creating the timeline's day partitions", transaction=True) as conn:
            conn.execute(query("day_partitions_lock_timeout"))
            conn.execute(query("lock_day_partitions"))
            rows = conn.execute(query("day_partitions")).fetchall()
            present = {_parse_bound(name, bound) for name, bound, _ in rows}
            for part in wanted:
                if part in present:
                    continue
                conn.execute(_statement("create_day_table", part))
                conn.execute(_statement("attach_day_partition", part))
                present.add(part)
                created += 1
        return created, present

    def drop_day_partitions_before(self, cutoff: int) -> int:
        """Drop every partition whose whole range is older than `cutoff` (whole
        partitions: never a DELETE); the number dropped. A drop left unfinished by an
        earlier call (a detach not finalized, a detached table not dropped) is finished
        first."""
        with self.connection("listing the timeline's day partitions") as conn:
            found = conn.execute(query("day_partitions")).fetchall()
            leftovers = [row[0] for row in conn.execute(query("detached_day_tables"))]
        parts = {_parse_bound(name, bound): bool(pending) for name, bound, pending in found}
        old = to_drop(list(parts), cutoff)
        if not old and not leftovers:
            return 0
        with self.connection("dropping the timeline's day partitions") as conn:
            conn.autocommit = True  # DETACH ... CONCURRENTLY runs outside a transaction
            try:
                for part in old:
                    step = "finalize_day_detach" if parts[part] else "detach_day_partition"
                    conn.execute(_statement(step, part))
                    conn.execute(_statement("drop_day_table", part))
                for name in leftovers:
                    conn.execute(query("drop_day_table").format(partition=sql.Identifier(name)))
            finally:
                conn.autocommit = False
        return len(old)
