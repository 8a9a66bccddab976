"""The pure half of `pinledger replay`'s verify (projections/verify.py): fold one
partition's records through `evolve` into the rows the live tables must hold, as lines
of text (projections/row_text.py), and compare two key-ordered streams of lines. No I/O
here: the records and the live lines come in as iterables.

Memory is bounded by `max_jobs`, not by the backlog. The timeline rows are produced
in log order and compared as they come (nothing of them is kept); only the jobs a
partition holds at once are kept, and a partition that holds more than `max_jobs` is
folded in ranges of local ids, one pass per range (`IdRange`). A job's local id comes
from its enqueue record's offset (ledger/descriptor.py), so a range of ids is a range
of enqueue offsets: a pass starts reading at its range's first offset.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pinledger.ledger import codec
from pinledger.ledger.descriptor import JOBS_PER_RECORD
from pinledger.ledger.events import CatalogEvent, Enqueued, Envelope, Event, JobEvent
from pinledger.ledger.log import LogRecord
from pinledger.ledger.state import Job, Stamp, event_local_id, evolve, key_holder
from pinledger.projections.row_text import (
    EVENT_COLUMNS,
    JOB_COLUMNS,
    columns,
    event_line,
    job_line,
    leading_ints,
)
from pinledger.projections.timeline_rows import timeline_row, turned_away_row

T = TypeVar("T")


@dataclass(slots=True)
class TableDiff:
    """Rows of a table only in the live projection, only in the log's fold: counts and
    the first `samples` of each (as dicts of columns)."""

    table: str
    only_live: int = 0
    only_replay: int = 0
    live_samples: list[Any] = field(default_factory=list)
    replay_samples: list[Any] = field(default_factory=list)

    def add(self, other: TableDiff, samples: int) -> None:
        self.only_live += other.only_live
        self.only_replay += other.only_replay
        self.live_samples = (self.live_samples + other.live_samples)[:samples]
        self.replay_samples = (self.replay_samples + other.replay_samples)[:samples]


def compare_sorted(
    expected: Iterable[T],
    live: Iterable[T],
    key: Callable[[T], Any],
    diff: TableDiff,
    sample: Callable[[T], Any],
    samples: int,
) -> int:
    """Merge two streams ordered by `key` (ascending) and count the rows of each that
    the other lacks (a row present on both sides with other values counts on both, as
    a SQL EXCEPT ALL both ways would). Returns the number of rows compared."""
    _end = object()
    left, right = iter(expected), iter(live)
    want: Any = next(left, _end)
    have: Any = next(right, _end)
    compared = 0

    def only_replay(row: T) -> None:
        diff.only_replay += 1
        if len(diff.replay_samples) < samples:
            diff.replay_samples.append(sample(row))

    def only_live(row: T) -> None:
        diff.only_live += 1
        if len(diff.live_samples) < samples:
            diff.live_samples.append(sample(row))

    while want is not _end or have is not _end:
        compared += 1
        if want == have:  # nearly every row: no key needed
            want, have = next(left, _end), next(right, _end)
        elif have is _end or (want is not _end and key(want) < key(have)):
            only_replay(want)
            want = next(left, _end)
        elif want is _end or key(have) < key(want):
            only_live(have)
            have = next(right, _end)
        else:  # the same key, other values
            only_replay(want)
            only_live(have)
            want, have = next(left, _end), next(right, _end)
    return compared


@dataclass(frozen=True, slots=True)
class IdRange:
    """The jobs one pass folds: local ids in [lo, hi) (None: no limit). A pass also
    owns the timeline rows of the records in its offset range that name a job not
    enqueued yet (an ack for an id from the future: rejected, its row needs no state),
    so that every timeline row belongs to exactly one pass."""

    lo: int | None = None
    hi: int | None = None

    @property
    def start(self) -> int:
        """The first offset a pass must read: where its first job can be enqueued."""
        return 0 if self.lo is None else self.lo // JOBS_PER_RECORD

    def holds(self, local_id: int) -> bool:
        return (self.lo is None or local_id >= self.lo) and (self.hi is None or local_id < self.hi)

    def owns(self, local_id: int, offset: int) -> bool:
        """Whether this pass compares the timeline row of the event at `offset` that
        names `local_id`."""
        if local_id // JOBS_PER_RECORD > offset:  # a job from the future
            return offset >= self.start and (self.hi is None or offset < self.hi // JOBS_PER_RECORD)
        return self.holds(local_id)


class Overflow(Exception):  # noqa: N818 (a signal between the fold and its caller)
    """A pass without an upper limit held more than `max_jobs`: fold again up to `hi`."""

    def __init__(self, hi: int) -> None:
        super().__init__(hi)
        self.hi = hi


def cut_point(ids: Iterable[int], lo: int | None) -> int:
    """Where to split a range that held too many jobs: at the median id held, rounded
    down to a record boundary (so the next range starts at an offset), and past `lo`."""
    ordered = sorted(ids)
    median = ordered[len(ordered) // 2]
    hi = (median // JOBS_PER_RECORD) * JOBS_PER_RECORD
    floor = 0 if lo is None else lo
    return max(hi, floor + JOBS_PER_RECORD)


def _events(record: LogRecord) -> Iterator[tuple[int, Event, Envelope, Stamp, str | None]]:
    """Each event of a record with its index in the record and its envelope's time,
    actor and trace context (a group record holds several envelopes: decision 0020)."""
    for part in codec.decode_parts(record.value, record.headers):
        envelope = part.envelope
        stamp = Stamp(envelope.at, envelope.actor)
        for idx, event in enumerate(envelope.events, start=part.first):
            yield idx, event, envelope, stamp, part.traceparent


class Keys:
    """The keyed jobs of a partition (unique jobs, decision 0037), folded from every
    event that names one, and the ids holding each key."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self.ids: dict[str, set[int]] = {}

    def copy(self) -> Keys:
        keys = Keys()
        keys.jobs = dict(self.jobs)
        keys.ids = {key: set(ids) for key, ids in self.ids.items() if ids}
        return keys

    def fold(self, local_id: int, event: JobEvent, stamp: Stamp) -> Job | None:
        """Apply `event` to the keyed job it names, if any; for a keyed enqueue, the job
        holding its key (None: it creates its job, which is kept from here on)."""
        if isinstance(event, Enqueued):
            key = event.unique_key
            if not key:
                return None
            ids = self.ids.setdefault(key, set())
            holder = key_holder(event, stamp, (self.jobs.get(i) for i in ids))
            if holder is None:
                job, _ = evolve(None, event, stamp, local_id)
                if job is not None:
                    self.jobs[local_id] = job._replace(body=b"")
                    ids.add(local_id)
            return holder
        job = self.jobs.get(local_id)
        if job is None:
            return None
        after, _ = evolve(job, event, stamp, local_id)
        if after is None:
            del self.jobs[local_id]
            if job.unique_key is not None:
                self.ids[job.unique_key].discard(local_id)
        else:
            self.jobs[local_id] = after._replace(body=b"")
        return None


class PartitionFold:
    """Folds one partition's records for one `IdRange`: `events()` yields the timeline
    rows the range owns, in log order, and leaves the jobs of the range in `jobs` (with
    the enqueue trace contexts in `traceparents`) when it ends. The records at `skipped`
    offsets (an operator skipped them: decision 0032) are passed over, not decoded, as
    the projector passes over them."""

    def __init__(
        self,
        id_range: IdRange,
        max_jobs: int | None,
        skipped: Collection[int] = frozenset(),
        keyed: Keys | None = None,
    ) -> None:
        self.range = id_range
        self.max_jobs = max_jobs
        self.skipped = skipped
        self.jobs: dict[int, Job] = {}
        self.traceparents: dict[int, str] = {}
        # Every keyed job of the partition (a key is held across ranges): what a keyed
        # enqueue is decided against, as the projector decides it (decision 0037). A
        # pass starts with them as they were where it starts reading (`keyed`, from the
        # pass before), and leaves them as they are where the next range starts
        # (`keyed_at_hi`).
        self.keyed = Keys() if keyed is None else keyed.copy()
        self.keyed_at_hi: Keys | None = None
        # Timeline rows yielded: one per job event this range owns.
        self.rows = 0

    def events(self, records: Iterable[LogRecord]) -> Iterator[bytes]:
        """The timeline rows this range owns, as lines (projections/row_text.py)."""
        whole = self.range == IdRange()
        holds, owns = self.range.holds, self.range.owns
        jobs = self.jobs
        skipped, keyed = self.skipped, self.keyed
        next_start = None if self.range.hi is None else IdRange(self.range.hi).start
        for record in records:
            offset = record.offset
            self._reached(offset, next_start)
            if offset in skipped:
                continue
            for idx, event, envelope, stamp, traceparent in _events(record):
                if isinstance(event, CatalogEvent):
                    continue  # the projector ignores them here too
                local_id = event_local_id(event, offset, idx)
                holder = keyed.fold(local_id, event, stamp)
                if holder is not None and (whole or owns(holder.local_id, offset)):
                    # The holder's copy, in the holder's range, before the enqueue's own
                    # row: the holder's id is the lower (the order: offset, idx, id).
                    self.rows += 1
                    yield event_line(
                        turned_away_row(holder, offset, idx, envelope, event, traceparent)
                    )
                held = whole or holds(local_id)
                if not (held or owns(local_id, offset)):
                    continue
                prior = jobs.get(local_id) if held else None
                after, verdict = evolve(prior, event, stamp, local_id, holder)
                if held:
                    self._keep(local_id, event, after, verdict.applied, traceparent)
                if whole or owns(local_id, offset):
                    self.rows += 1
                    yield event_line(
                        timeline_row(
                            local_id,
                            offset,
                            idx,
                            envelope,
                            event,
                            prior,
                            after,
                            verdict,
                            traceparent,
                            holder,
                        )
                    )
            if self.max_jobs is not None and self.range.hi is None and len(jobs) > self.max_jobs:
                raise Overflow(cut_point(jobs, self.range.lo))
        if next_start is not None:
            self._reached(next_start, next_start)

    def _keep(
        self,
        local_id: int,
        event: JobEvent,
        after: Job | None,
        applied: bool,
        traceparent: str | None,
    ) -> None:
        """The range's job after an event that names it (gone when `after` is None)."""
        if after is None:
            self.jobs.pop(local_id, None)
            self.traceparents.pop(local_id, None)
            return
        self.jobs[local_id] = after
        if isinstance(event, Enqueued) and applied and traceparent:
            self.traceparents[local_id] = traceparent

    def _reached(self, offset: int, next_start: int | None) -> None:
        """Keep the keyed jobs as they are before the record at `offset`, when it is the
        first at or past where the next range starts."""
        if next_start is not None and offset >= next_start and self.keyed_at_hi is None:
            self.keyed_at_hi = self.keyed.copy()

    def job_lines(self) -> Iterator[bytes]:
        """The range's jobs after the fold, by local id, as lines."""
        for local_id in sorted(self.jobs):
            yield job_line(self.jobs[local_id], self.traceparents.get(local_id))


def event_key(line: bytes) -> tuple[int, ...]:
    """(offset, idx, local_id, at): the order of both sides of the timeline."""
    return leading_ints(line, 4)


def job_key(line: bytes) -> tuple[int, ...]:
    return leading_ints(line, 1)


def event_sample(line: bytes) -> dict[str, str | None]:
    return columns(line, EVENT_COLUMNS)


def job_sample(line: bytes) -> dict[str, str | None]:
    return columns(line, JOB_COLUMNS)


def owned_lines(lines: Iterable[bytes], id_range: IdRange) -> Iterator[bytes]:
    """The live timeline lines a range owns."""
    for line in lines:
        offset, _, local_id = leading_ints(line, 3)
        if id_range.owns(local_id, offset):
            yield line
