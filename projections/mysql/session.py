"""One MariaDB connection in use by the SQL store (projections/sql/dialect.py
`Session`): named queries through PyMySQL, whose `executemany` sends an INSERT's rows
as multi-row INSERTs of about 1 MB (MariaDB has no COPY), and an unbuffered cursor for
the verify's streams."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pymysql.cursors

from pinledger.projections.mysql.connection import Connection
from pinledger.projections.mysql.rows import event_params
from pinledger.projections.mysql.sql import query
from pinledger.projections.row_mapping import job_params
from pinledger.projections.sql.dialect import Params
from pinledger.projections.store import PartitionBatch


def _json_value(value: Any) -> Any:
    # Bytes as Postgres's to_jsonb prints a bytea, so both stores' reports read alike.
    return "\\x" + value.hex() if isinstance(value, bytes | bytearray) else value


class MySession:
    def __init__(self, conn: Connection, cur: pymysql.cursors.Cursor) -> None:
        self.conn = conn
        self.cur = cur

    def execute(self, name: str, params: Params, **identifiers: str) -> int:
        return self.cur.execute(query(name, **identifiers), params)

    def fetchall(self, name: str, params: Params, **identifiers: str) -> list[tuple[Any, ...]]:
        self.cur.execute(query(name, **identifiers), params)
        return list(self.cur.fetchall())

    def executemany(self, name: str, rows: Sequence[Params]) -> None:
        self.cur.executemany(query(name), rows)

    def samples(self, name: str, params: Params, **identifiers: str) -> list[Any]:
        # Each row as a dict of its columns, as Postgres's to_jsonb gives them.
        self.cur.execute(query(name, **identifiers), params)
        columns = [d[0] for d in self.cur.description or ()]
        return [
            {c: _json_value(v) for c, v in zip(columns, row, strict=True)}
            for row in self.cur.fetchall()
        ]

    def stream(self, name: str, params: Params) -> Iterator[tuple[Any, ...]]:
        with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(query(name), params)
            yield from cur

    def copy_lines(self, name: str, params: Params) -> Iterator[bytes]:
        raise NotImplementedError("MariaDB does not print rows as lines (formats_lines)")

    def insert_events(self, batch: PartitionBatch) -> None:
        self.executemany(
            "insert_job_event",
            [event_params(batch.queue, batch.partition, row) for row in batch.events],
        )

    def upsert_jobs(self, batch: PartitionBatch) -> None:
        self.executemany("upsert_job", [job_params(batch, job) for job in batch.upserts])
