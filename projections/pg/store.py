"""The Postgres adapter: the only code that executes SQL (all of it from queries.sql).

`Store` implements projections.store.LedgerStore; it is assembled from one module per
responsibility: the connection, pool, migrations and error translation
(connection.py), the projector's writes (writes.py), the reads of current jobs
(reads.py), the timeline and as-of reads (timeline.py), the replay's diff (diff.py)
and the verify's streams (streams.py).
The errors and rows are the port's (projections/store.py), named here too for the
callers that import them from the adapter.
"""

from __future__ import annotations

from pinledger.projections.pg.connection import check_schema_name
from pinledger.projections.pg.dashboard import PgDashboardReads
from pinledger.projections.pg.diff import PgDiff
from pinledger.projections.pg.reads import PgReads
from pinledger.projections.pg.streams import PgStreams
from pinledger.projections.pg.timeline import PgTimeline
from pinledger.projections.pg.writes import PgWrites
from pinledger.projections.store import (
    DueJob,
    EventRow,
    FencedError,
    InvalidRegexError,
    JobCount,
    JobFilter,
    JobRow,
    PartitionBatch,
    PartitionGoneError,
    QueueRow,
    ScanKey,
    StateCount,
    StoreError,
    TableDiff,
    TimelineRow,
)

__all__ = [
    "DueJob",
    "EventRow",
    "FencedError",
    "InvalidRegexError",
    "JobCount",
    "JobFilter",
    "JobRow",
    "PartitionBatch",
    "PartitionGoneError",
    "QueueRow",
    "ScanKey",
    "StateCount",
    "Store",
    "StoreError",
    "TableDiff",
    "TimelineRow",
    "check_schema_name",
]


class Store(PgWrites, PgReads, PgTimeline, PgDashboardReads, PgDiff, PgStreams):
    """A projection in one Postgres schema."""
