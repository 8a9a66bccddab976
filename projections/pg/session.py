"""One Postgres connection in use by the SQL store (projections/sql/dialect.py
`Session`): named queries through psycopg, and what Postgres does its own way: binary
COPY for many rows, server-side cursors and COPY TO STDOUT for the verify's streams."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pinledger.projections.pg.sql import composed, query
from pinledger.projections.row_mapping import job_params
from pinledger.projections.sql.dialect import Params
from pinledger.projections.store import PartitionBatch

# Rows fetched per round trip of a server-side cursor.
PAGE_ROWS = 5000

# The column types of copy_job_events_binary, in its order.
_EVENT_TYPES = (
    "text",
    "int4",
    "int8",
    "int8",
    "int4",
    "text",
    "int8",
    "text",
    "text",
    "text",
    "text",
    "bool",
    "text",
    "int2",
    "int4",
    "jsonb",
    "text",
)

# The column types of copy_jobs_stage, in its order.
_JOB_TYPES = (
    "text",
    "int4",
    "int8",
    "int2",
    "int2",
    "bytea",
    "int4",
    "int4",
    "text",
    "int8",
    "int8",
    "int8",
    "text",
    "text",
    "int8",
    "text",
    "text",
)


def _statement(name: str, identifiers: dict[str, str]) -> sql.SQL | sql.Composed:
    return composed(name, **identifiers) if identifiers else query(name)


class PgSession:
    def __init__(self, conn: psycopg.Connection, one_statement_upserts: int) -> None:
        self.conn = conn
        self.one_statement_upserts = one_statement_upserts

    def execute(self, name: str, params: Params, **identifiers: str) -> int:
        return self.conn.execute(_statement(name, identifiers), params).rowcount

    def fetchall(self, name: str, params: Params, **identifiers: str) -> list[tuple[Any, ...]]:
        return self.conn.execute(_statement(name, identifiers), params).fetchall()

    def executemany(self, name: str, rows: Sequence[Params]) -> None:
        self.conn.cursor().executemany(query(name), rows)

    def samples(self, name: str, params: Params, **identifiers: str) -> list[Any]:
        # diff_rows returns each row as one jsonb value.
        return [row[0] for row in self.fetchall(name, params, **identifiers)]

    def stream(self, name: str, params: Params) -> Iterator[tuple[Any, ...]]:
        # A named cursor lives in a transaction; the pool rolls it back on return.
        with self.conn.cursor(name=f"pinledger_{name}") as cur:
            cur.itersize = PAGE_ROWS
            cur.execute(query(name), params)
            yield from cur

    def copy_lines(self, name: str, params: Params) -> Iterator[bytes]:
        with self.conn.cursor() as cur, cur.copy(query(name), params) as copy:
            # libpq hands over one row per block (a message of its own); split anyway.
            for block in copy:
                yield from bytes(block).split(b"\n")[:-1]

    def insert_events(self, batch: PartitionBatch) -> None:
        """A batch's timeline rows by binary COPY, the detail serialized by orjson: ~20%
        less of our CPU per replayed event than text COPY and the json module did
        (docs/performance-history.md, "Replay")."""
        with self.conn.cursor().copy(query("copy_job_events_binary")) as copy:
            copy.set_types(_EVENT_TYPES)
            queue, partition = batch.queue, batch.partition
            for row in batch.events:
                copy.write_row(
                    (
                        queue,
                        partition,
                        row.local_id,
                        row.offset,
                        row.idx,
                        row.type,
                        row.at,
                        row.source,
                        row.request_id,
                        row.server,
                        row.claim,
                        row.applied,
                        row.verdict,
                        row.state_after,
                        row.attempts_remaining_after,
                        Jsonb(row.detail, dumps=orjson.dumps),
                        row.traceparent,
                    )
                )

    def upsert_jobs(self, batch: PartitionBatch) -> None:
        """A small batch as pipelined single-row upserts, a large one (from
        `one_statement_upserts` jobs on) by binary COPY into the session's staging table
        and one upsert from it (projections/pg/dialect.py says why)."""
        if len(batch.upserts) < self.one_statement_upserts:
            self.executemany("upsert_job", [job_params(batch, job) for job in batch.upserts])
            return
        self.conn.execute(query("create_jobs_stage"))
        queue, partition, traceparents = batch.queue, batch.partition, batch.traceparents
        with self.conn.cursor().copy(query("copy_jobs_stage")) as copy:
            copy.set_types(_JOB_TYPES)
            for job in batch.upserts:
                copy.write_row(
                    (
                        queue,
                        partition,
                        job.local_id,
                        job.priority,
                        int(job.state),
                        job.body,
                        job.attempts_allowed,
                        job.attempts_remaining,
                        job.custom_status,
                        job.created_at,
                        job.run_after,
                        job.updated_at,
                        job.claim,
                        job.claim_source,
                        job.touched_at,
                        traceparents.get(job.local_id),
                        job.unique_key,
                    )
                )
        self.conn.execute(query("upsert_staged_jobs"))
