"""The Postgres store: the SQL store (projections/sql/) over the Postgres dialect
(dialect.py), the only code that runs the Postgres store's SQL (all of it from
queries.sql) through psycopg, the only importer of that driver.

The errors and rows are the port's (projections/store.py), named here too for the
callers that import them from the adapter.
"""

from __future__ import annotations

from pinledger.projections.pg.dialect import ONE_STATEMENT_UPSERTS, PgDialect
from pinledger.projections.sql.names import check_schema_name
from pinledger.projections.sql.store import SqlStore
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


class Store(SqlStore):
    """A projection in one Postgres schema (created when missing, not migrated).
    `one_statement_upserts`: from how many jobs a batch's upserts go as one statement
    (projections/pg/dialect.py)."""

    dialect: PgDialect

    def __init__(
        self,
        dsn: str,
        schema: str = "public",
        max_size: int = 8,
        one_statement_upserts: int = ONE_STATEMENT_UPSERTS,
    ) -> None:
        super().__init__(PgDialect(dsn, schema, max_size, one_statement_upserts))
