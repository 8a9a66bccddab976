"""Reads of the job_events timeline: a job's rows, a queue's newest event."""

from __future__ import annotations

from pinledger.projections.row_mapping import event
from pinledger.projections.sql.base import SqlBase
from pinledger.projections.store import EventRow, TimelineRow


class SqlTimeline(SqlBase):
    def timeline(self, queue: str, partition: int, local_id: int) -> list[TimelineRow]:
        params = {"queue": queue, "partition": partition, "local_id": local_id}
        found = self._all("reading a job's timeline", "job_timeline", params)
        return [self.dialect.timeline_row(row) for row in found]

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        """The job's timeline as rows, in log order (what projections/history.py reads)."""
        return [event(local_id, row) for row in self.timeline(queue, partition, local_id)]

    def last_event_time(self, queue: str) -> int | None:
        params = {"queue": queue, "away": self._hidden(queue)}
        found = self._first("reading the last event time", "last_event_time", params)
        return None if found is None else int(found)
