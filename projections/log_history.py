"""A job's timeline rebuilt from the log, for a job whose rows (job_events) the history
retention dropped.

The descriptor names the partition and the offset of the record that enqueued the job
(ledger/descriptor.py), so its events are all at or after that offset: read the
partition from there, decode each record (ledger/codec.py), keep the events that name
the job, and fold them through `evolve` into the same rows the projector wrote
(projections/timeline_rows.py). Reading stops at the job's Collected event (garbage
collection removes it; nothing later changes it), at the partition's end as of the
call, or at `max_records` records: a bound, so one trace never reads a whole
partition (`HistoryScanLimitError` says so and how far it got).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from pinledger.ledger import codec
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import CatalogEvent, Collected, Enqueued, Envelope, JobEvent
from pinledger.ledger.log import Log, LogError, LogRecord, Position
from pinledger.ledger.state import Job, Stamp, event_local_id, evolve, key_holder
from pinledger.projections.store import EventRow
from pinledger.projections.timeline_rows import timeline_row, turned_away_row

# Records asked of the log per poll, and how long one poll waits.
POLL_RECORDS = 500
POLL_TIMEOUT_MS = 500
# Polls in a row that deliver nothing before the log is called unresponsive.
IDLE_POLLS = 20


class HistoryScanLimitError(LogError):
    """Reading a job's history from the log stopped at its record bound."""


class HistoryGoneError(LogError):
    """The log no longer holds the job's enqueue record (the topic's retention)."""


@dataclass(frozen=True, slots=True)
class LogScan:
    """What reading the log found: the job's rows (empty when the record at the
    descriptor's offset did not enqueue it: no such job) and the records read."""

    rows: list[EventRow]
    records: int


class _Fold:
    """The job's rows as the projector would have written them (passing over the records
    an operator skipped, at `skipped` offsets)."""

    def __init__(self, job: JobDescriptor, skipped: Collection[int] = frozenset()) -> None:
        self.job = job
        self.skipped = skipped
        self.rows: list[EventRow] = []
        self.current: Job | None = None
        self.collected = False

    def record(self, record: LogRecord) -> None:
        if record.offset in self.skipped:
            return
        for part in codec.decode_parts(record.value, record.headers):
            if self._part(record.offset, part):
                return

    def _part(self, offset: int, part: codec.Part) -> bool:
        """Fold one envelope; True once the job was collected (its history ends)."""
        envelope = part.envelope
        stamp = Stamp(envelope.at, envelope.actor)
        for idx, event in enumerate(envelope.events, start=part.first):
            if isinstance(event, CatalogEvent):
                continue
            local_id = event_local_id(event, offset, idx)
            if local_id != self.job.local_id:
                self._turned_away(offset, idx, envelope, event, stamp, part.traceparent)
                continue
            prior = self.current
            after, verdict = evolve(prior, event, stamp, local_id)
            row = timeline_row(
                local_id, offset, idx, envelope, event, prior, after, verdict, part.traceparent
            )
            self.rows.append(row)
            self.current = after
            if isinstance(event, Collected) and verdict.applied:
                self.collected = True
                return True
        return False

    def _turned_away(
        self,
        offset: int,
        idx: int,
        envelope: Envelope,
        event: JobEvent,
        stamp: Stamp,
        traceparent: str | None,
    ) -> None:
        """The holder's copy of an enqueue this job's key turned away (as the projector
        writes it, timeline_rows.turned_away_row). Only this job is folded here: when
        another job of the key held it too, the projector may have named that one."""
        current = self.current
        if (
            isinstance(event, Enqueued)
            and event.unique_key
            and current is not None
            and current.unique_key == event.unique_key
            and key_holder(event, stamp, [current]) is current
        ):
            self.rows.append(turned_away_row(current, offset, idx, envelope, event, traceparent))


def _enqueued_here(record: LogRecord, job: JobDescriptor, skipped: Collection[int]) -> bool:
    """Whether the record at the descriptor's offset enqueued the job (a skipped record
    enqueued nothing)."""
    if record.offset in skipped:
        return False
    events = codec.record_events(record.value, record.headers)
    return job.index < len(events) and isinstance(events[job.index], Enqueued)


def has_enqueue(job: JobDescriptor, rows: list[EventRow]) -> bool:
    """Whether timeline rows read from the store start with the job's enqueue: if so
    they are whole (a retention drops whole days, oldest first, and every later event
    of the job is in the enqueue's day or a later one), else the oldest were dropped."""
    return any(r.offset == job.offset and r.idx == job.index and r.type == "enq" for r in rows)


def job_rows(
    rows: list[EventRow],
    log: Log,
    topic: str,
    job: JobDescriptor,
    max_records: int,
    skipped: Callable[[], Collection[int]] = frozenset,
) -> list[EventRow]:
    """The job's timeline: the store's `rows` when they hold its enqueue, else the
    log's (the retention dropped the oldest rows); the store's rows again when the
    log says the descriptor never named an enqueued job (rejected events naming it).
    `skipped`: the offsets of the partition's records an operator skipped (decision
    0032), read only when the log is."""
    if has_enqueue(job, rows):
        return rows
    scan = read_history(log, topic, job, max_records, skipped())
    return scan.rows if scan.rows else rows


def read_history(
    log: Log,
    topic: str,
    job: JobDescriptor,
    max_records: int,
    skipped: Collection[int] = frozenset(),
) -> LogScan:
    """The job's timeline rows from the log, passing over the records at `skipped`
    offsets as the projection does. Raises HistoryGoneError when the log no longer
    starts at or before the job's enqueue, HistoryScanLimitError when `max_records`
    records were read before the job's end, LogError when the log cannot be read."""
    end = log.end_offset(topic, job.partition)
    if job.offset >= end:
        return LogScan([], 0)
    fold = _Fold(job, skipped)
    read = 0
    idle = 0
    reader = log.reader([Position(topic, job.partition, job.offset)])
    try:
        while True:
            records = reader.poll(min(POLL_RECORDS, max_records - read), POLL_TIMEOUT_MS)
            if not records:
                idle += 1
                if idle >= IDLE_POLLS:
                    raise LogError(
                        f"{topic}[{job.partition}]: the log delivered nothing for "
                        f"{IDLE_POLLS * POLL_TIMEOUT_MS / 1000:.0f} s while reading the "
                        f"history of {job} from offset {job.offset + read}"
                    )
                continue
            idle = 0
            for record in sorted(records, key=lambda r: r.offset):
                if record.offset >= end:
                    return LogScan(fold.rows, read)
                if read == 0:
                    if record.offset != job.offset:
                        raise HistoryGoneError(
                            f"the history of {job} is gone: its rows were dropped by the "
                            f"history retention, and {topic}[{job.partition}] now starts at "
                            f"offset {record.offset}, after its enqueue at {job.offset} "
                            "(the topic's retention)"
                        )
                    if not _enqueued_here(record, job, skipped):
                        return LogScan([], 1)
                fold.record(record)
                read += 1
                if fold.collected or record.offset + 1 >= end:
                    return LogScan(fold.rows, read)
                if read >= max_records:
                    raise HistoryScanLimitError(
                        f"reading the history of {job} from the log stopped after "
                        f"{read} records (offsets {job.offset}..{record.offset} of "
                        f"{topic}[{job.partition}], which ends at {end}) before the job's "
                        "end; raise PINLEDGER_HISTORY_SCAN_RECORDS to read further"
                    )
    finally:
        reader.close()
