"""The verify's streams (`pinledger replay`, projections/verify.py): a partition's jobs
and timeline as rows (through a server-side cursor, a page at a time) or as lines of
text (through COPY: Postgres formats them in C, projections/row_text.py), so a partition
of any size is compared in bounded memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pinledger.projections.columns import event, held
from pinledger.projections.pg.connection import PgConnection
from pinledger.projections.pg.sql import query
from pinledger.projections.store import EventRow, HeldJob, TimelineRow

# Rows fetched per round trip of a server-side cursor.
PAGE_ROWS = 5000

# The ends of bigint: an open range of local ids, as an index range.
_SMALLEST, _LARGEST = -(2**63), 2**63 - 1


class PgStreams(PgConnection):
    def _stream(self, what: str, name: str, params: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        # A named cursor lives in a transaction; the pool rolls it back on return.
        with self.connection(what) as conn, conn.cursor(name=f"pinledger_{name}") as cur:
            cur.itersize = PAGE_ROWS
            cur.execute(query(name), params)
            yield from cur

    def _lines(self, what: str, name: str, params: dict[str, Any]) -> Iterator[bytes]:
        with (
            self.connection(what) as conn,
            conn.cursor() as cur,
            cur.copy(query(name), params) as copy,
        ):
            # libpq hands over one row per block (a message of its own); split anyway.
            for block in copy:
                yield from bytes(block).split(b"\n")[:-1]

    def job_lines(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[bytes]:
        params = {
            "queue": queue,
            "partition": partition,
            "lo": _SMALLEST if lo is None else lo,
            "hi": _LARGEST if hi is None else hi,
        }
        return self._lines("streaming a partition's jobs", "job_lines", params)

    def event_lines(self, queue: str, partition: int, from_offset: int) -> Iterator[bytes]:
        params = {"queue": queue, "partition": partition, "from_offset": from_offset}
        return self._lines("streaming a partition's timeline", "event_lines", params)

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
            yield held(row)

    def stream_events(self, queue: str, partition: int, from_offset: int) -> Iterator[EventRow]:
        params = {"queue": queue, "partition": partition, "from_offset": from_offset}
        for row in self._stream("streaming a partition's timeline", "stream_events", params):
            yield event(row[0], TimelineRow(*row[1:]))
