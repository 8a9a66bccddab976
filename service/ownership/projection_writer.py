"""The owner's projection writer: commits the batches the owner thread folded, on a
thread of its own, so that the owner thread goes on polling and handing out jobs while
Postgres is written (docs/decisions/0023-projection-writer.md).

The owner thread folds each partition's records (the projector's `fold`: the ready
buffer and the observers are told at once) and hands the batch to `submit`. The writer
merges every batch queued for a partition since its last commit into one transaction
(projections/merge.py): while one commit runs, the next batches queue, so the batches
grow with the load by themselves. Partitions take turns, oldest queued first.

What the owner thread may rely on:

- `flush(keys)`: returns once everything folded for those partitions is committed, or
  raises the error their commit met (bounded: `FLUSH_WAIT_S`). Every read of job state
  from the store on the owner side flushes its partitions first (partitions.py).
- `take_errors()`: the errors commits met since the last call, one per partition (the
  partition's queued batches are discarded with it: the owner drops and re-adopts the
  partition, or reloads everything, from the committed offset).
- `discard(key)`, `discard_all()`: forget what is queued for a partition dropped or
  reloaded, and wait (bounded) for a commit of it in flight to end, so that what the
  owner then reads from the store does not move under it.
- `submit` blocks while more than `MAX_UNCOMMITTED_EVENTS` timeline rows wait
  (backpressure: memory is bounded), at most `FLUSH_WAIT_S`.

The thread survives every error of the store (the error goes to the owner thread, which
handles it as it handled a failed commit before) and ends with `close`, which commits
what it can within a bounded time. Waits are in real time (thread hand-offs, as joins
are), not on the injected clock.

Locking: one condition (`_cond`) guards the lanes, the error table and the counters;
it is never held across a commit, and no other lock is taken while holding it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from pinledger.ledger.log import PartitionKey
from pinledger.projections.merge import merge_batches
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import PartitionBatch, ProjectorStore, StoreUnavailableError
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

Key = PartitionKey

# Timeline rows folded and not yet committed, all partitions together, above which the
# owner thread waits before handing over the next batch (backpressure). About 1 KB of
# memory each with the job rows they come with, so tens of MB at most; large enough
# that a merged transaction is never the limit at the loads measured (a commit of a
# few thousand rows takes milliseconds).
MAX_UNCOMMITTED_EVENTS = 50_000
# How long the owner thread waits for the writer (a flush, a discard, room to submit)
# before it gives up and treats the pass as failed.
FLUSH_WAIT_S = 10.0
# How long `close` spends committing what is queued.
CLOSE_WAIT_S = 5.0


class ProjectionStalledError(StoreUnavailableError):
    """The projection writer did not commit in time (a hung or very slow store)."""


@dataclass
class _Lane:
    """One partition's queued batches, for the projector that folded them."""

    projector: PartitionProjector
    batches: list[PartitionBatch] = field(default_factory=list)
    events: int = 0
    # When the oldest queued batch was queued (monotonic): partitions take turns.
    since: float = 0.0


class ProjectionWriter:
    def __init__(self, store: ProjectorStore, metrics: Metrics | None = None) -> None:
        self.store = store
        self.metrics = metrics
        self._cond = threading.Condition()
        self._lanes: dict[Key, _Lane] = {}
        # The partition whose commit runs now, and the lane it was taken from.
        self._committing: tuple[Key, _Lane] | None = None
        self._errors: dict[Key, Exception] = {}
        self._held_events = 0
        self._stopping = False
        self._failures = RateLimitedLog(log, burst=3, window_s=60.0)
        # Commits made and batches they merged (tests and metrics read them).
        self.commits = 0
        self.merged = 0
        # How often a flush had to wait for a commit (tests wait on it).
        self.flush_waits = 0
        self.thread = threading.Thread(target=self._run, name="projection-writer", daemon=True)

    def start(self) -> None:
        self.thread.start()

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    # -- the owner thread ---------------------------------------------------------

    def submit(self, key: Key, projector: PartitionProjector, batch: PartitionBatch) -> None:
        """Queue a folded batch of `key` for its commit (after those queued before it).
        Waits while the writer holds more than MAX_UNCOMMITTED_EVENTS rows."""
        deadline = time.monotonic() + FLUSH_WAIT_S
        with self._cond:
            while self._held_events > MAX_UNCOMMITTED_EVENTS and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProjectionStalledError(
                        f"the projection writer holds {self._held_events} uncommitted "
                        f"events after {FLUSH_WAIT_S:.0f} s"
                    )
                self._cond.wait(left)
            lane = self._lanes.get(key)
            if lane is None or lane.projector is not projector:
                if lane is not None:  # an earlier owning of the partition, not discarded
                    self._held_events -= lane.events
                lane = self._lanes[key] = _Lane(projector)
            if not lane.batches:
                lane.since = time.monotonic()
            lane.batches.append(batch)
            lane.events += len(batch.events)
            self._held_events += len(batch.events)
            self._cond.notify_all()

    def idle(self) -> bool:
        """Whether no batch waits for its commit or is being committed."""
        with self._cond:
            return self._committing is None and not any(
                lane.batches for lane in self._lanes.values()
            )

    def pending(self, key: Key) -> bool:
        """Whether batches of `key` wait for their commit or are being committed."""
        with self._cond:
            return self._busy(key)

    def _busy(self, key: Key) -> bool:
        lane = self._lanes.get(key)
        committing = self._committing
        return (lane is not None and bool(lane.batches)) or (
            committing is not None and committing[0] == key
        )

    def flush(self, keys: list[Key]) -> None:
        """Wait until everything folded for `keys` is committed. Raises the error a
        commit of one of them met (left for `take_errors` too), or
        ProjectionStalledError after FLUSH_WAIT_S."""
        deadline = time.monotonic() + FLUSH_WAIT_S
        with self._cond:
            while True:
                for key in keys:
                    error = self._errors.get(key)
                    if error is not None:
                        raise error
                busy = [key for key in keys if self._busy(key)]
                if not busy:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProjectionStalledError(
                        f"the projection of {busy} was not committed within {FLUSH_WAIT_S:.0f} s"
                    )
                self.flush_waits += 1
                self._cond.wait(left)

    def take_errors(self) -> dict[Key, Exception]:
        """The errors commits met since the last call, by partition."""
        with self._cond:
            errors, self._errors = self._errors, {}
            return errors

    def discard(self, key: Key) -> None:
        """Forget what is queued for `key` and its error; wait (bounded) for a commit of
        it in flight to end. Raises ProjectionStalledError when it does not."""
        self._discard([key])

    def discard_all(self) -> None:
        """`discard` for every partition."""
        with self._cond:
            keys = list(self._lanes) + list(self._errors)
            if self._committing is not None:
                keys.append(self._committing[0])
        self._discard(keys)

    def _discard(self, keys: list[Key]) -> None:
        deadline = time.monotonic() + FLUSH_WAIT_S
        with self._cond:
            for key in keys:
                lane = self._lanes.pop(key, None)
                if lane is not None:
                    self._held_events -= lane.events
                self._errors.pop(key, None)
            self._cond.notify_all()
            while self._committing is not None and self._committing[0] in keys:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProjectionStalledError(
                        f"a commit of {self._committing[0]} did not end within {FLUSH_WAIT_S:.0f} s"
                    )
                self._cond.wait(left)
            # What the commit in flight met is no news for a partition forgotten.
            for key in keys:
                self._errors.pop(key, None)

    def close(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """Commit what is queued within `timeout_s`, then stop the thread."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (self._lanes and any(lane.batches for lane in self._lanes.values())) or (
                self._committing is not None
            ):
                left = deadline - time.monotonic()
                if left <= 0 or not self.thread.is_alive():
                    break
                self._cond.wait(left)
            left_over = sum(len(lane.batches) for lane in self._lanes.values())
            self._stopping = True
            self._held_events -= sum(lane.events for lane in self._lanes.values())
            self._lanes.clear()
            self._cond.notify_all()
        if left_over:
            # The log has them: the next owner projects them from the committed offset.
            log.warning("stopping with %d folded batch(es) not committed", left_over)
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(max(0.1, deadline - time.monotonic()))

    # -- the writer thread --------------------------------------------------------

    def _next(self) -> tuple[Key, _Lane, list[PartitionBatch], int] | None:
        """Take the lane queued longest (call with the condition held)."""
        ready = [(lane.since, key) for key, lane in self._lanes.items() if lane.batches]
        if not ready:
            return None
        _, key = min(ready)
        lane = self._lanes[key]
        batches, events = lane.batches, lane.events
        lane.batches, lane.events = [], 0
        self._committing = (key, lane)
        return key, lane, batches, events

    def _run(self) -> None:
        while True:
            with self._cond:
                taken = self._next()
                while taken is None:
                    if self._stopping:
                        return
                    self._cond.wait()
                    taken = self._next()
            key, lane, batches, events = taken
            try:
                self._commit(key, lane, batches)
            except Exception as exc:
                # The thread outlives any error of the store's: the owner thread is told
                # and reloads the partition; the writer goes on with the others.
                self._failures.warning(
                    "committing %s[%d] failed (%s: %s)", key[0], key[1], type(exc).__name__, exc
                )
                log.debug("the projection writer's failure", exc_info=True)
                with self._cond:
                    if self._lanes.get(key) is lane:
                        # Batches queued after a failed one cannot be committed: the
                        # partition is reloaded from the committed offset.
                        self._held_events -= lane.events
                        del self._lanes[key]
                        self._errors[key] = exc
            finally:
                with self._cond:
                    self._held_events -= events
                    self._committing = None
                    self._cond.notify_all()

    def _commit(self, key: Key, lane: _Lane, batches: list[PartitionBatch]) -> None:
        batch = merge_batches(batches)
        self.store.commit_partition_batch(batch)
        lane.projector.committed(batch.next_offset)
        self.commits += 1
        self.merged += len(batches)
        if self.metrics is not None:
            self.metrics.count("pinledger_projection_commits_total", 1, queue=batch.queue)
            self.metrics.count(
                "pinledger_projection_batches_total", len(batches), queue=batch.queue
            )
