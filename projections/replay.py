"""Replay: rebuild the projection from the log into a scratch schema and compare it
with the live tables.

The live projection may be moving while a replay runs, so the replay is bounded by
the offsets the live projection had committed when it started: both sides then
cover exactly the same records and must be identical, row for row.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from pinledger.ledger.log import Log, queue_topic
from pinledger.projections.projector import Bound, ProjectionRunner, Scope
from pinledger.projections.store import LedgerStore
from pinledger.projections.verify_fold import TableDiff

# (table, column naming the queue, integer column naming the partition)
_COMPARED = (
    ("queues", "name", "partitions"),
    ("jobs", "queue", "partition"),
    ("job_events", "queue", "partition"),
    ("imported_descriptors", "queue", "partition"),
    ("skipped_records", "queue", "partition"),
    ("schedule_ticks", "queue", "tick_ms"),
)
# The catalog's tables of whole queues: compared whole, whatever partition is replayed
# (their integer column above is any integer column; it is never filtered on).
_OF_QUEUES = frozenset({"queues", "schedule_ticks"})


@dataclass(slots=True)
class ReplayReport:
    events: int
    seconds: float
    diffs: list[TableDiff]
    compared: bool

    @property
    def identical(self) -> bool:
        return all(d.only_live == 0 and d.only_replay == 0 for d in self.diffs)


def replay(
    live: LedgerStore,
    scratch: LedgerStore,
    log: Log,
    prefix: str,
    scope: Scope,
    progress: Callable[[int, int], None] | None = None,
    samples: int = 5,
) -> ReplayReport:
    """Rebuild `scope` into `scratch` and, when the scope is not bounded by an offset
    or a time, diff it against `live` over the same records."""
    scratch.migrate()
    compare = scope.bound == Bound()
    if compare:
        scope = _bounded_by_live(live, prefix, scope)
    started = time.monotonic()
    runner = ProjectionRunner(scratch, log, prefix, scope)
    try:
        events = runner.catch_up(progress)
    finally:
        runner.close()
    seconds = time.monotonic() - started
    diffs: list[TableDiff] = []
    if compare:
        queues = sorted(
            scope.queues or {q.name for q in live.queues()} | {q.name for q in scratch.queues()}
        )
        for table, queue_column, partition_column in _COMPARED:
            only_live, only_replay, live_rows, replay_rows = live.diff(
                other_schema=scratch.schema,
                table=table,
                queue_column=queue_column,
                partition_column=partition_column,
                queues=queues,
                partition=None if table in _OF_QUEUES else scope.partition,
                limit=samples,
            )
            diffs.append(TableDiff(table, only_live, only_replay, live_rows, replay_rows))
    return ReplayReport(events=events, seconds=seconds, diffs=diffs, compared=compare)


def _bounded_by_live(live: LedgerStore, prefix: str, scope: Scope) -> Scope:
    """Limit each partition's replay to the offset the live projection has reached."""
    keys = [
        (queue_topic(prefix, row.name), partition)
        for row in live.queues()
        for partition in range(row.partitions)
        if scope.covers(row.name, partition)
    ]
    reached = live.offsets(keys)
    # A partition with no offset (its queue deleted since the queues were read) has
    # nothing projected: replayed up to nothing.
    bounds = {key: reached.get(key, 0) for key in keys}
    return dataclasses.replace(scope, partition_bounds=bounds)
