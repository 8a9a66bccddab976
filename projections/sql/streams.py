"""The verify's streams (`pinledger replay`, projections/verify.py): a partition's jobs
and timeline as rows, a page at a time, or as lines of text (projections/row_text.py:
Postgres prints them itself through COPY, otherwise they are formatted from the rows),
so a partition of any size is compared in bounded memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pinledger.projections.row_mapping import event, held
from pinledger.projections.row_text import event_line, job_line
from pinledger.projections.sql.base import SqlBase
from pinledger.projections.sql.dialect import Params
from pinledger.projections.store import EventRow, HeldJob

# The ends of a 64-bit integer: an open range of local ids, as an index range.
_SMALLEST, _LARGEST = -(2**63), 2**63 - 1


def _id_range(queue: str, partition: int, lo: int | None, hi: int | None) -> dict[str, Any]:
    return {
        "queue": queue,
        "partition": partition,
        "lo": _SMALLEST if lo is None else lo,
        "hi": _LARGEST if hi is None else hi,
    }


class SqlStreams(SqlBase):
    def _stream(self, what: str, name: str, params: Params) -> Iterator[tuple[Any, ...]]:
        with self.dialect.session(what) as session:
            yield from session.stream(name, params)

    def _lines(self, what: str, name: str, params: Params) -> Iterator[bytes]:
        with self.dialect.session(what) as session:
            yield from session.copy_lines(name, params)

    def stream_jobs(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[HeldJob]:
        params = _id_range(queue, partition, lo, hi)
        for row in self._stream("streaming a partition's jobs", "stream_jobs", params):
            yield held(row)

    def stream_events(self, queue: str, partition: int, from_offset: int) -> Iterator[EventRow]:
        params = {"queue": queue, "partition": partition, "from_offset": from_offset}
        timeline_row = self.dialect.timeline_row
        for row in self._stream("streaming a partition's timeline", "stream_events", params):
            yield event(row[0], timeline_row(row[1:]))

    def job_lines(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[bytes]:
        if self.dialect.formats_lines:
            params = _id_range(queue, partition, lo, hi)
            return self._lines("streaming a partition's jobs", "job_lines", params)
        return (job_line(h.job, h.traceparent) for h in self.stream_jobs(queue, partition, lo, hi))

    def event_lines(self, queue: str, partition: int, from_offset: int) -> Iterator[bytes]:
        if self.dialect.formats_lines:
            params = {"queue": queue, "partition": partition, "from_offset": from_offset}
            return self._lines("streaming a partition's timeline", "event_lines", params)
        return (event_line(row) for row in self.stream_events(queue, partition, from_offset))
