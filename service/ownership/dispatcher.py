"""The owner's in-memory ready buffers: dequeue is answered from here, not by scanning
tables (Pacer's design).

One `ReadyBuffer` per owned partition holds the partition's unfinished jobs as the
projection last applied them, with one heap of (run_after, local_id) per priority.
Heaps are lazy: an entry is checked against the job when it reaches the top and
dropped when the job has moved on, so updates are O(log n) pushes and nothing is ever
searched. A job handed to a dequeue stays *reserved* until its claim record has been
projected (or the append failed), so two dequeues never hand out the same job.

Pure: no I/O, no clock (callers pass `now`), no locking (the owner holds one lock
around every call).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from pinledger.ledger.state import FINISHED, Job, JobState

# Rebuild a heap when stale entries outnumber live ones by this factor, so a partition
# with churn but no dequeues does not grow without bound.
_COMPACT_FACTOR = 4


class ReadyBuffer:
    def __init__(self, max_priority: int) -> None:
        self.max_priority = max_priority
        self.jobs: dict[int, Job] = {}
        self.reserved: set[int] = set()
        self._heaps: dict[int, list[tuple[int, int]]] = {}
        self._in_progress: dict[int, Job] = {}
        # Claims a timeout has been appended for, so it is not appended again while the
        # record is on its way through the projection.
        self._timing_out: set[tuple[int, int | None]] = set()

    def __len__(self) -> int:
        return len(self.jobs)

    def load(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self._put(job)

    def update(self, touched: Mapping[int, Job | None], claimed: Iterable[int] = ()) -> None:
        """Take in what a projected batch did: jobs after the batch (None = removed or
        finished) and the ids a claim record named (whatever its verdict)."""
        for local_id in claimed:
            self.reserved.discard(local_id)
        for local_id, job in touched.items():
            if job is None or job.state in FINISHED:
                self.jobs.pop(local_id, None)
                self._in_progress.pop(local_id, None)
            else:
                self._put(job)

    def _put(self, job: Job) -> None:
        old = self.jobs.get(job.local_id)
        self.jobs[job.local_id] = job
        if job.state is JobState.IN_PROGRESS:
            self._in_progress[job.local_id] = job
            return
        self._in_progress.pop(job.local_id, None)
        if old is not None and old.state is JobState.PENDING and old.run_after == job.run_after:
            return  # the heap already has this entry
        heap = self._heaps.setdefault(job.priority, [])
        heapq.heappush(heap, (job.run_after, job.local_id))
        if len(heap) > _COMPACT_FACTOR * (len(self.jobs) + 16):
            self._compact(job.priority)

    def _compact(self, priority: int) -> None:
        heap = [entry for entry in self._heaps[priority] if self._live(priority, entry)]
        heapq.heapify(heap)
        self._heaps[priority] = heap

    def _live(self, priority: int, entry: tuple[int, int]) -> bool:
        run_after, local_id = entry
        job = self.jobs.get(local_id)
        return (
            job is not None
            and job.state is JobState.PENDING
            and job.priority == priority
            and job.run_after == run_after
            and local_id not in self.reserved
        )

    def best(self, now: int) -> tuple[int, int, int] | None:
        """(priority, run_after, local_id) of the job a dequeue should take next from
        this partition, or None when no job is due."""
        for priority in sorted(self._heaps):
            heap = self._heaps[priority]
            while heap and not self._live(priority, heap[0]):
                heapq.heappop(heap)
            if heap and heap[0][0] <= now:
                return priority, heap[0][0], heap[0][1]
        return None

    def reserve(self, local_id: int) -> Job:
        self.reserved.add(local_id)
        return self.jobs[local_id]

    def release(self, ids: Iterable[int]) -> None:
        """Undo reservations whose claim never reached the log."""
        for local_id in ids:
            self.reserved.discard(local_id)
            job = self.jobs.get(local_id)
            if job is not None and job.state is JobState.PENDING:
                heapq.heappush(self._heaps.setdefault(job.priority, []), (job.run_after, local_id))

    def due(self, now: int, limit: int) -> list[Job]:
        """The jobs a dequeue would take, without taking them (dryRun)."""
        entries = sorted(
            (priority, run_after, local_id)
            for priority, heap in self._heaps.items()
            for run_after, local_id in heap
            if run_after <= now and self._live(priority, (run_after, local_id))
        )
        seen: set[int] = set()
        jobs = []
        for _, _, local_id in entries:
            if local_id not in seen:
                seen.add(local_id)
                jobs.append(self.jobs[local_id])
            if len(jobs) >= limit:
                break
        return jobs

    def expired_claims(self, now: int, claim_timeout_ms: int) -> list[Job]:
        """IN_PROGRESS jobs whose claim was not renewed in time and whose timeout has
        not been appended yet. Marks them as timing out."""
        expired = [
            job
            for job in self._in_progress.values()
            if job.touched_at is not None
            and job.touched_at + claim_timeout_ms <= now
            and (job.local_id, job.touched_at) not in self._timing_out
        ]
        self._timing_out = {key for key in self._timing_out if key[0] in self._in_progress} | {
            (job.local_id, job.touched_at) for job in expired
        }
        return expired

    def forget_timeouts(self, jobs: Sequence[Job]) -> None:
        """The timeout append failed: let the next round try again."""
        for job in jobs:
            self._timing_out.discard((job.local_id, job.touched_at))


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
