"""What a database must provide for the one SQL store (projections/sql/store.py): the
small port each dialect (projections/pg, projections/mysql) implements.

The store's logic (the reads, the batch commit with its offset compare-and-set and its
retry, the catalog, the timeline, the dashboard's reads, the diff, the streams, the
cache of day partitions) is written once against these two protocols. A dialect keeps
only what really differs: its driver and pool, its named queries (the SQL text differs
by dialect, so each has its own queries.sql with the same names), its migrations, how
it writes many rows (COPY or multi-row INSERTs), its day partitions' DDL, how driver
errors become StoreError and how its driver returns some columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from pinledger.projections.day_partitions import DayPartition
from pinledger.projections.migration_plan import Plan, Progress
from pinledger.projections.store import PartitionBatch, StoreError, TimelineRow

Params = Mapping[str, Any]


class Session(Protocol):
    """One pooled connection in use (in one transaction when the store asked for one).
    Queries are named (the dialect's queries.sql); `identifiers` fill in table, column
    and schema names, quoted by the dialect."""

    def execute(self, name: str, params: Params, **identifiers: str) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    def fetchall(self, name: str, params: Params, **identifiers: str) -> list[tuple[Any, ...]]: ...

    def executemany(self, name: str, rows: Sequence[Params]) -> None: ...

    def insert_events(self, batch: PartitionBatch) -> None:
        """Write the batch's timeline rows (job_events)."""
        ...

    def upsert_jobs(self, batch: PartitionBatch) -> None:
        """Insert or update the batch's jobs (the first created_at and trace context of
        a job stay)."""
        ...

    def stream(self, name: str, params: Params) -> Iterator[tuple[Any, ...]]:
        """The rows of a query, fetched a page at a time (bounded memory)."""
        ...

    def copy_lines(self, name: str, params: Params) -> Iterator[bytes]:
        """The rows of a query as lines of text the database formats itself (only when
        the dialect `formats_lines`)."""
        ...

    def samples(self, name: str, params: Params, **identifiers: str) -> list[Any]:
        """The diff's sample rows, each as one JSON-like value."""
        ...


class Dialect(Protocol):
    """One database's connection to one schema (a Postgres schema, a MariaDB database)."""

    # "postgres" or "mysql": whose regular expressions and byte rendering body regexes
    # use, and which migrations the schema has.
    kind: str
    dsn: str
    schema: str
    # Whether the database prints the verify's lines itself (Postgres's COPY TO STDOUT);
    # otherwise the store formats them from rows (projections/row_text.py).
    formats_lines: bool

    def session(self, what: str, transaction: bool = False) -> AbstractContextManager[Session]:
        """A pooled connection; a driver error inside becomes StoreError saying `what`
        was being done."""
        ...

    def migrate(
        self,
        upto: int | None = None,
        *,
        allow_pause: bool = False,
        progress: Progress | None = None,
    ) -> list[str]: ...

    def migration_plan(self, upto: int | None = None) -> Plan: ...

    def close(self) -> None: ...

    def drop(self) -> None: ...

    def check_schema_name(self, schema: str) -> str: ...

    def pair_params(self, pairs: Sequence[tuple[Any, Any]], first: str, second: str) -> Params:
        """The parameters of a query over (first, second) pairs: Postgres takes two
        arrays, MariaDB one list of tuples (`pairs`)."""
        ...

    def partition_set(self, partitions: Sequence[int]) -> Any:
        """The `away` parameter of a queue-wide read: the partitions it leaves out (none:
        empty). Postgres takes an array, MariaDB a comma-separated string."""
        ...

    def timeline_row(self, row: Sequence[Any]) -> TimelineRow:
        """A job_timeline row as the store's row (a driver may return some columns in
        other types)."""
        ...

    # -- the day partitions of job_events (decision 0013): the DDL differs by database --

    def day_partitions(self) -> list[DayPartition]:
        """The day partitions of job_events, oldest first."""
        ...

    def create_day_partitions(self, wanted: list[DayPartition]) -> tuple[int, set[DayPartition]]:
        """Create the wanted days that are missing; (how many were created, the days
        present after)."""
        ...

    def drop_day_partitions_before(self, cutoff: int) -> int:
        """Drop the days whose whole range ends at or before `cutoff`; how many."""
        ...

    def missing_partition(self, exc: StoreError) -> bool:
        """Whether a write failed because no partition of job_events takes a row."""
        ...
