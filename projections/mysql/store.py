"""The MySQL/MariaDB adapter: the only code that executes the MySQL store's SQL (all of
it from queries.sql), through PyMySQL, the only importer of that driver.

`Store` implements projections.store.LedgerStore as projections/pg does on Postgres,
assembled from one module per responsibility: the connection, pool, migrations and
error translation (connection.py), the projector's writes (writes.py), the reads of
current jobs (reads.py), the timeline and as-of reads (timeline.py), the dashboard's
reads (dashboard.py), the day partitions (history.py), the replay's diff (diff.py) and
the verify's streams (streams.py).
Dialect differences: docs/decisions/0016-mysql-store.md.
"""

from __future__ import annotations

from pinledger.projections.mysql.connection import check_schema_name
from pinledger.projections.mysql.dashboard import MyDashboardReads
from pinledger.projections.mysql.diff import MyDiff
from pinledger.projections.mysql.streams import MyStreams
from pinledger.projections.mysql.timeline import MyTimeline
from pinledger.projections.mysql.writes import MyWrites

__all__ = ["Store", "check_schema_name"]


class Store(MyWrites, MyTimeline, MyDashboardReads, MyDiff, MyStreams):
    """A projection in one MariaDB/MySQL database."""
