"""The Postgres dialect of the SQL store (projections/sql/dialect.py): its connection
and pool (connection.py), its day partitions' DDL (day_partitions.py), its sessions
(session.py) and the few row and parameter shapes psycopg takes its own way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pinledger.projections.pg.day_partitions import PgDayPartitions
from pinledger.projections.pg.session import PgSession
from pinledger.projections.sql.dialect import Params
from pinledger.projections.sql.names import check_schema_name
from pinledger.projections.store import TimelineRow

# From this many jobs on, a batch's upserts go as one statement (a binary COPY into a
# staging table and one upsert from it); below it, as pipelined single-row upserts
# (upsert_job). Every batch, by default: against pipelined upserts below 1,000 jobs
# (the old threshold, chosen against an unnest form the staged COPY has replaced),
# Postgres's CPU per one-job enqueue fell to 0.67x, per job completed at batch 1 0.76x,
# at batch 50 0.85x, the server's not higher (docs/performance.md, issue 44).
ONE_STATEMENT_UPSERTS = 1


class PgDialect(PgDayPartitions):
    kind = "postgres"
    formats_lines = True

    def __init__(self, dsn: str, schema: str, max_size: int, one_statement_upserts: int) -> None:
        super().__init__(dsn, schema, max_size)
        self.one_statement_upserts = one_statement_upserts

    @contextmanager
    def session(self, what: str, transaction: bool = False) -> Iterator[PgSession]:
        with self.connection(what, transaction) as conn:
            yield PgSession(conn, self.one_statement_upserts)

    def check_schema_name(self, schema: str) -> str:
        return check_schema_name(schema)

    def pair_params(self, pairs: Sequence[tuple[Any, Any]], first: str, second: str) -> Params:
        # Two arrays, unnested side by side by the query.
        return {first: [a for a, _ in pairs], second: [b for _, b in pairs]}

    def partition_set(self, partitions: Sequence[int]) -> Any:
        # An integer array: `partition <> ALL(%(away)s::integer[])`.
        return list(partitions)

    def timeline_row(self, row: Sequence[Any]) -> TimelineRow:
        return TimelineRow(*row)
