"""The verify's streams (`pinledger replay`, projections/verify.py): a partition's jobs
and timeline read through an unbuffered cursor, so a partition of any size is compared
in bounded memory. Its lines are these rows formatted as Postgres prints them
(projections/row_text.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql.cursors

from pinledger.projections.mysql import rows
from pinledger.projections.mysql.connection import MyConnection
from pinledger.projections.mysql.sql import query
from pinledger.projections.row_text import event_line, job_line
from pinledger.projections.store import EventRow, HeldJob

# The ends of BIGINT: an open range of local ids, as an index range.
_SMALLEST, _LARGEST = -(2**63), 2**63 - 1


class MyStreams(MyConnection):
    def _stream(self, what: str, name: str, params: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        with self.connection(what) as conn, conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(query(name), params)
            yield from cur

    def stream_jobs(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[HeldJob]:
        params = {
            "queue": queue,
            "partition": partition,
            "lo": _SMALLEST if lo is None else lo,
            "hi": _LARGEST if hi is None else hi,
        }
        for row in self._stream("streaming a partition's jobs", "stream_jobs", params):
            yield rows.held(row)

    def stream_events(self, queue: str, partition: int, from_offset: int) -> Iterator[EventRow]:
        params = {"queue": queue, "partition": partition, "from_offset": from_offset}
        for row in self._stream("streaming a partition's timeline", "stream_events", params):
            yield rows.event(row[0], rows.timeline(row[1:]))

    def job_lines(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[bytes]:
        for held in self.stream_jobs(queue, partition, lo, hi):
            yield job_line(held.job, held.traceparent)

    def event_lines(self, queue: str, partition: int, from_offset: int) -> Iterator[bytes]:
        for row in self.stream_events(queue, partition, from_offset):
            yield event_line(row)
