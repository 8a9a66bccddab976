"""The one SQL store: projections.store.LedgerStore over a dialect (projections/sql/
dialect.py), assembled from one module per responsibility: the projector's writes and
the offsets' compare-and-set (writes.py), the day partitions' cache and retry
(day_partitions.py), the reads of current jobs (reads.py), a job's timeline
(timeline.py), the as-of counts (as_of_counts.py), the dashboard's reads
(dashboard.py), the replay's diff (diff.py), the verify's streams (streams.py) and
the dashboard's ended sessions (sessions.py).

projections/pg and projections/mysql each give it their dialect; what differs between
the two databases is documented in docs/decisions/0016-mysql-store.md."""

from __future__ import annotations

from pinledger.projections.sql.as_of_counts import SqlAsOfCounts
from pinledger.projections.sql.dashboard import SqlDashboardReads
from pinledger.projections.sql.diff import SqlDiff
from pinledger.projections.sql.reads import SqlReads
from pinledger.projections.sql.sessions import SqlEndedSessions
from pinledger.projections.sql.streams import SqlStreams
from pinledger.projections.sql.timeline import SqlTimeline
from pinledger.projections.sql.writes import SqlWrites


class SqlStore(
    SqlWrites,
    SqlReads,
    SqlTimeline,
    SqlAsOfCounts,
    SqlDashboardReads,
    SqlDiff,
    SqlStreams,
    SqlEndedSessions,
):
    """A projection in one schema (a MariaDB database) of one SQL database."""
