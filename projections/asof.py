"""A queue as it was at a past moment: what `pinledger replay --as-of` reports.

The moment is a time (every record stamped at or before it) or an offset (every record
at or before it, in each partition replayed). A bounded replay (projections/replay.py)
rebuilds the projection up to that moment in a scratch schema; this module reads it
back: counts by state and priority, split into due and future as getJobCount splits
them; the PENDING jobs that were due, in the order a dequeue takes them; and why one
job was (or would be) dequeued before another.

The dequeue order is the owners' ready buffers' (service/ownership/dispatcher.py): lower priority
number first, then earlier run_after, then lower local id (earlier in the partition's
log), then lower partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.state import Job, JobState
from pinledger.ledger.times import format_ms, parse_ms
from pinledger.projections.projector import Bound
from pinledger.projections.store import ReadStore

# Below this a bare number is an offset; above it, milliseconds since the epoch
# (10**11 ms is March 1973: no ledger is older, no partition is that long).
_TIME_FLOOR_MS = 10**11


@dataclass(frozen=True, slots=True)
class AsOf:
    """The moment: `kind` is "time" (ms since the epoch) or "offset"."""

    kind: str
    value: int

    def bound(self) -> Bound:
        if self.kind == "offset":
            return Bound(offset=self.value + 1)  # the record at the offset included
        return Bound(at=self.value)

    def __str__(self) -> str:
        if self.kind == "offset":
            return f"offset {self.value}"
        return f"{format_ms(self.value)} UTC ({self.value})"


def parse_as_of(text: str) -> AsOf:
    """`offset:N`, `time:<ms or ISO-8601>`, or bare: a number below 10**11 is an offset,
    a larger one milliseconds since the epoch, anything else an ISO-8601 time (UTC
    unless it says). Raises ValueError with what was expected."""
    kind, _, rest = text.partition(":")
    if kind in ("offset", "time") and rest:
        return _offset(rest) if kind == "offset" else AsOf("time", _time(rest))
    if text.isdigit():
        number = int(text)
        return AsOf("offset", number) if number < _TIME_FLOOR_MS else AsOf("time", number)
    return AsOf("time", _time(text))


def _offset(text: str) -> AsOf:
    if not text.isdigit():
        raise ValueError(f"--as-of offset:{text}: the offset should be digits")
    return AsOf("offset", int(text))


def _time(text: str) -> int:
    try:
        return parse_ms(text)
    except ValueError:
        raise ValueError(
            f"--as-of {text!r}: expected an offset, milliseconds since the epoch, or an "
            "ISO-8601 time such as 2026-11-23T02:15:00 (or offset:N / time:...)"
        ) from None


@dataclass(frozen=True, slots=True)
class CountRow:
    state: JobState
    priority: int
    due: int
    future: int


@dataclass(frozen=True, slots=True)
class DueJob:
    descriptor: str
    priority: int
    run_after: int


@dataclass(frozen=True, slots=True)
class QueueAsOf:
    queue: str
    # The clock of the moment: the as-of time, or for an offset the newest event's time.
    now: int
    counts: list[CountRow]
    due: list[DueJob] = field(default_factory=list)
    # Why one job of a pair asked about is dequeued before the other (why_first).
    why: str = ""

    def count(self, state: JobState, future: bool = False) -> int:
        return sum(r.future if future else r.due for r in self.counts if r.state is state)


def queue_as_of(store: ReadStore, queue: str, now: int, limit: int) -> QueueAsOf:
    """Read a (replayed) projection as the queue's state at `now`."""
    merged: dict[tuple[JobState, int], list[int]] = {}
    for state, priority, future, n in store.counts_as_of(queue, now):
        merged.setdefault((state, priority), [0, 0])[1 if future else 0] += n
    counts = [CountRow(s, p, due, fut) for (s, p), (due, fut) in sorted(merged.items())]
    due = [
        DueJob(str(JobDescriptor(queue, partition, priority, local_id)), priority, run_after)
        for partition, local_id, priority, run_after in store.due_in_dequeue_order(
            queue, now, limit
        )
    ]
    return QueueAsOf(queue, now, counts, due)


def jobs_then(store: ReadStore, queue: str, ds: Sequence[JobDescriptor]) -> list[Job | None]:
    """The jobs `ds` name in a (replayed) projection, None for those it lacks."""
    for d in ds:
        if d.queue != queue:
            raise ValueError(f"{d}: the job is not in queue {queue!r}")
    found = {
        (row.partition, row.job.local_id): row.job
        for row in store.lookup(queue, [(d.partition, d.local_id) for d in ds], False)
    }
    return [found.get((d.partition, d.local_id)) for d in ds]


def dequeue_key(d: JobDescriptor, job: Job) -> tuple[int, int, int, int]:
    """What a dequeue orders due jobs by (lowest first)."""
    return (job.priority, job.run_after, job.local_id, d.partition)


def why_first(
    a: tuple[JobDescriptor, Job | None], b: tuple[JobDescriptor, Job | None], now: int
) -> tuple[JobDescriptor | None, str]:
    """Which of two jobs a dequeue at `now` takes first (None: neither was waiting to
    be dequeued), and why, in a sentence."""
    waiting: list[tuple[JobDescriptor, Job | None, str]] = []
    for d, job in (a, b):
        if job is None:
            waiting.append((d, None, f"{d} did not exist then (not yet enqueued, or removed)"))
        elif job.state is not JobState.PENDING:
            waiting.append((d, None, f"{d} was {job.state.name}, not waiting to be dequeued"))
        elif job.run_after > now:
            waiting.append((d, None, f"{d} was not due until {format_ms(job.run_after)} UTC"))
        else:
            waiting.append((d, job, ""))
    (da, ja, ra), (db, jb, rb) = waiting
    if ja is None and jb is None:
        return None, f"neither: {ra}; {rb}"
    if ja is None or jb is None:
        first, reason = (db, ra) if ja is None else (da, rb)
        return first, f"{first} first: {reason}"
    ka, kb = dequeue_key(da, ja), dequeue_key(db, jb)
    first, second, kf, ks = (da, db, ka, kb) if ka < kb else (db, da, kb, ka)
    if kf[0] != ks[0]:
        why = f"priority {kf[0]} is taken before priority {ks[0]}"
    elif kf[1] != ks[1]:
        why = (
            f"same priority {kf[0]}; it was due earlier ({format_ms(kf[1])} UTC, "
            f"the other at {format_ms(ks[1])} UTC)"
        )
    elif kf[2] != ks[2] and kf[3] == ks[3]:
        why = (
            f"same priority and run_after; it is earlier in the partition's log "
            f"(enqueued at offset {kf[2] // 1000}, the other at {ks[2] // 1000})"
        )
    elif kf[2] != ks[2]:
        why = (
            f"same priority and run_after; its local id is lower ({kf[2]} < {ks[2]}), "
            "the owners' tie-break across partitions"
        )
    else:
        why = f"same priority, run_after and local id; partition {kf[3]} comes first"
    return first, f"{first} before {second}: {why}"
