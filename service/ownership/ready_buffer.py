"""The owner's ready windows: dequeue is answered from here, not by scanning tables
(Pacer's design), and memory does not grow with the backlog
(docs/decisions/0014-ready-window.md).

One `ReadyBuffer` per owned partition holds, for each priority, a *window*: the first
PENDING jobs of that priority in dequeue order (run_after, then local_id), with their
bodies, at most `capacity // max_priority` of them. Each priority's window is a prefix
of the partition's PENDING jobs: every PENDING job up to its `bound` key is in it (or
reserved by a dequeue), none after; a bound of None means the window holds them all.
Jobs past the bound are only in Postgres: the owner refills a window running low from
there (`wants`, then `fill`), through an index in the same order, on the owner thread
between projected batches, never on the dequeue path. A job that becomes PENDING
(enqueued, retried, failed with attempts left, timed out) enters when its key is within
the bound; a window over its capacity gives up its last jobs and lowers the bound.

Delayed jobs sort after the due ones of their priority, so they enter as the jobs
ahead of them leave, and are handed out when due. IN_PROGRESS and finished jobs are not
held: the projector reads them from Postgres when an event names them, and the claim
timeouts read expired claims there (maintenance/claim_timeouts.py).

A job handed to a dequeue stays *reserved* until its claim record has been projected
(or the append certainly wrote nothing), so two dequeues never hand out the same job.
A claim append that failed without saying whether its record is in the log leaves its
jobs reserved *in doubt* (`doubt`): the owner reads the partition's end offset after
the failure into each of `unread_doubts` (Partitions.settle_doubts), and once the
projection has reached it (`settle`) the claim either was projected (the job is
IN_PROGRESS under it) or never landed, and the jobs it did not name are released.

Pure: no I/O, no clock (callers pass `now`), no locking (the owner holds one lock
around every call).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pinledger.ledger.state import Job, JobState
from pinledger.projections.store import READY_START

# Jobs per partition held ready, all priorities together (PINLEDGER_READY_WINDOW).
DEFAULT_WINDOW = 3000
# A priority's window is refilled once no more than this share of its capacity is left.
LOW_WATER = 0.5

Key = tuple[int, int]  # (run_after, local_id): dequeue order within a priority


def _key(job: Job) -> Key:
    return job.run_after, job.local_id


@dataclass(eq=False, slots=True)
class Doubt:
    """Jobs whose claim append failed without saying whether the record is in the log;
    `end`: the partition's end offset read after the failure (None: not read yet)."""

    ids: set[int]
    end: int | None = None


@dataclass(slots=True)
class _Lane:
    """One priority's window: its keys in order (reserved jobs left out) and its bound."""

    keys: list[Key] = field(default_factory=list)
    # Every PENDING job with a key up to this one is held (or reserved); None: all are.
    # READY_START: none is known yet (a new owner before its first refill).
    bound: Key | None = READY_START

    def within(self, key: Key) -> bool:
        return self.bound is None or key <= self.bound

    def remove(self, key: Key) -> None:
        at = bisect.bisect_left(self.keys, key)
        if at < len(self.keys) and self.keys[at] == key:
            del self.keys[at]


class ReadyBuffer:
    def __init__(
        self, max_priority: int, capacity: int = DEFAULT_WINDOW, from_store: bool = False
    ) -> None:
        """`from_store`: the partition's PENDING jobs are in Postgres, to be read by
        refills (an owner adopting it); else the buffer starts knowing them all (none)."""
        self.max_priority = max_priority
        self.lane_capacity = max(1, capacity // max(1, max_priority))
        self.jobs: dict[int, Job] = {}
        self.reserved: set[int] = set()
        self._start: Key | None = READY_START if from_store else None
        self._lanes: dict[int, _Lane] = {
            p: _Lane(bound=self._start) for p in range(1, max_priority + 1)
        }
        # Ids that left the window without a projected change (a full window gave them
        # up): the owner forgets their trace contexts.
        self.evicted: list[int] = []
        # Reservations whose claim may or may not be in the log (`doubt`).
        self.doubts: list[Doubt] = []

    def __len__(self) -> int:
        return len(self.jobs)

    def _lane(self, priority: int) -> _Lane:
        lane = self._lanes.get(priority)
        if lane is None:
            lane = self._lanes[priority] = _Lane(bound=self._start)
        return lane

    def load(self, jobs: Iterable[Job]) -> None:
        """Offer these jobs (the PENDING ones are held within the windows' bounds)."""
        for job in jobs:
            if job.state is JobState.PENDING:
                self._offer(job)

    # -- what the owner thread does: projected changes and refills ---------------------

    def update(self, touched: Mapping[int, Job | None], claimed: Iterable[int] = ()) -> None:
        """Take in what a projected batch did: jobs after the batch (None = removed or
        finished) and the ids a claim record named (whatever its verdict)."""
        for local_id in claimed:
            self.reserved.discard(local_id)
        if self.doubts:
            # A projected claim settles a doubt about these jobs: they are its now.
            for doubt in self.doubts:
                doubt.ids.difference_update(claimed)
        for local_id, job in touched.items():
            self._drop(local_id)
            if job is not None and job.state is JobState.PENDING:
                self._offer(job)

    def wants(self) -> list[tuple[int, Key, int]]:
        """(priority, bound, room) of each window running low whose bound leaves jobs
        in Postgres: what to read (after `bound`, at most `room`) and `fill` with."""
        return [
            (priority, lane.bound, self.lane_capacity - len(lane.keys))
            for priority, lane in sorted(self._lanes.items())
            if lane.bound is not None and len(lane.keys) <= self.lane_capacity * LOW_WATER
        ]

    def fill(self, priority: int, after: Key, jobs: Sequence[Job], room: int) -> bool:
        """Add what a refill read (PENDING jobs of `priority` after `after`, at most
        `room`, in order). Refused (False) when the bound moved since the read."""
        lane = self._lane(priority)
        if lane.bound != after:
            return False
        for job in jobs:
            if job.local_id in self.reserved:
                continue  # handed out already; its claim decides what comes next
            self.jobs[job.local_id] = job
            bisect.insort(lane.keys, _key(job))
        lane.bound = _key(jobs[-1]) if len(jobs) >= room else None
        self._trim(lane)
        return True

    def _offer(self, job: Job) -> None:
        """A PENDING job: held when its key is within its window's bound."""
        if job.local_id in self.reserved:
            self.jobs[job.local_id] = job
            return
        lane = self._lane(job.priority)
        key = _key(job)
        if not lane.within(key):
            return  # Postgres has it; a refill reaches it in order
        self.jobs[job.local_id] = job
        bisect.insort(lane.keys, key)
        self._trim(lane)

    def _trim(self, lane: _Lane) -> None:
        """Give up the last jobs of a window over its capacity, lowering its bound."""
        if len(lane.keys) <= self.lane_capacity:
            return
        for _, local_id in lane.keys[self.lane_capacity :]:
            self.jobs.pop(local_id, None)
            self.evicted.append(local_id)
        del lane.keys[self.lane_capacity :]
        lane.bound = lane.keys[-1]

    def _drop(self, local_id: int) -> None:
        job = self.jobs.get(local_id)
        if job is None:
            return
        if local_id not in self.reserved:
            self._lane(job.priority).remove(_key(job))
        del self.jobs[local_id]

    # -- what dequeues do (handler threads) ------------------------------------------

    def best(self, now: int) -> tuple[int, int, int] | None:
        """(priority, run_after, local_id) of the job a dequeue should take next from
        this partition, or None when no job is due. A priority whose window ran empty
        while Postgres may hold more of it stops the search: a lower priority must not
        go ahead of jobs not yet read (the next refill brings them)."""
        for priority in sorted(self._lanes):
            lane = self._lanes[priority]
            keys = lane.keys
            if keys and keys[0][0] <= now:
                return priority, keys[0][0], keys[0][1]
            if not keys and lane.bound is not None:
                return None
        return None

    def reserve(self, local_id: int) -> Job:
        job = self.jobs[local_id]
        self._lane(job.priority).remove(_key(job))
        self.reserved.add(local_id)
        return job

    def doubt(self, ids: Iterable[int]) -> None:
        """Keep these reservations, whose claim append failed without saying whether the
        record is in the log, until `settle` shows it is not."""
        self.doubts.append(Doubt(set(ids)))

    def unread_doubts(self) -> list[Doubt]:
        """The doubts whose end offset is still to be read (read it after this call)."""
        return [doubt for doubt in self.doubts if doubt.end is None]

    def settle(self, projected: int) -> int:
        """Release the jobs in doubt whose claim is not projected although the
        projection has reached (`projected`: the next offset it will project) the end
        read after their append failed: their claim never landed. Returns how many."""
        released = 0
        kept: list[Doubt] = []
        for doubt in self.doubts:
            if doubt.end is not None and projected >= doubt.end:
                self.release(doubt.ids)
                released += len(doubt.ids)
            elif doubt.ids:
                kept.append(doubt)
        self.doubts = kept
        return released

    def release(self, ids: Iterable[int]) -> None:
        """Undo reservations whose claim never reached the log."""
        for local_id in ids:
            self.reserved.discard(local_id)
            job = self.jobs.pop(local_id, None)
            if job is not None and job.state is JobState.PENDING:
                self._offer(job)

    def due(self, now: int, limit: int) -> list[Job]:
        """The jobs a dequeue would take, without taking them (dryRun)."""
        found: list[Job] = []
        for priority in sorted(self._lanes):
            lane = self._lanes[priority]
            for run_after, local_id in lane.keys:
                if run_after > now or len(found) >= limit:
                    break
                found.append(self.jobs[local_id])
            if not lane.keys and lane.bound is not None:
                break  # as `best`: nothing below a priority not yet read
        return found[:limit]

    def holds(self, local_id: int) -> bool:
        return local_id in self.jobs

    def lookup(self, ids: Iterable[int]) -> dict[int, Job]:
        """The held jobs among `ids` (the projector's cache)."""
        jobs = self.jobs
        return {i: jobs[i] for i in ids if i in jobs}

    def take_evicted(self) -> list[int]:
        evicted, self.evicted = self.evicted, []
        return evicted


def take(buffers: Sequence[ReadyBuffer], now: int, limit: int) -> list[tuple[int, Job]]:
    """Reserve up to `limit` due jobs across partitions: highest priority first, then
    earliest run_after. Returns (index of the buffer, job) pairs."""
    taken: list[tuple[int, Job]] = []
    while len(taken) < limit:
        best: tuple[tuple[int, int, int], int] | None = None
        for index, buffer in enumerate(buffers):
            top = buffer.best(now)
            if top is not None and (best is None or top < best[0]):
                best = (top, index)
        if best is None:
            break
        (_, _, local_id), index = best
        taken.append((index, buffers[index].reserve(local_id)))
    return taken
