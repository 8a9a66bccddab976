"""The partitions this server owns: their state, adoption and catch-up on assignment,
projection of their records, and revocation.

On assignment a partition is caught up to the end of the log as it was at assignment
before it serves; on revocation it stops serving at once (the rebalance callback only
flips state; Postgres work happens on the owner thread).

Locking: one lock, `Partitions.lock`, guards

- the ownership table (`owned`: which partitions are owned),
- each `Owned`'s mutable state: `serving`, `target`, its `ReadyBuffer` (which does no
  locking of its own), its `traceparents`, `sightings` and `timing_out`,
- the rebalance news the consumer's callbacks leave for the owner thread (`_news`).

Only the owner thread changes the table (adopt, drop, reload), so the owner thread may
read `owned` without the lock; every other thread reads it under the lock. Everything
done under the lock is in-memory and short, and no other lock is taken while it is
held, except the consumer's own subscription lock in `reload_all` (reading the
assignment; the consumer never calls our callbacks while holding it). The callbacks
run on the consumer's I/O thread, which also heartbeats: they take this lock only to
flip `serving` and record the news.

(This lock once had a sibling guarding only the rebalance news; the revoke callback
took one after the other. One lock is safe because no holder waits for another lock
or for Kafka, and it makes a revocation's two effects atomic.)

`catalog` is the owner thread's alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pinledger import otel
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.codec import CodecError
from pinledger.ledger.events import Enqueued, RecordSkipped
from pinledger.ledger.log import (
    GroupReader,
    Log,
    LogError,
    LogRecord,
    PartitionKey,
    catalog_topic,
    queue_of_topic,
    queue_topic,
)
from pinledger.ledger.state import FINISHED, Job, JobState
from pinledger.projections.projector import CatalogProjectors, PartitionProjector, Transition
from pinledger.projections.skips import stored_reason
from pinledger.projections.store import (
    FencedError,
    LedgerStore,
    PartitionGoneError,
    PlacementUnknownError,
    ProjectorStore,
    StoreError,
    StoreUnavailableError,
)
from pinledger.service.observability import catalogue
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.live_traces import LiveTraces
from pinledger.service.ownership.paused import Pauses
from pinledger.service.ownership.ready_buffer import DEFAULT_WINDOW, ReadyBuffer
from pinledger.service.ownership.sightings import Sightings
from pinledger.service.ownership.spans import rejected_spans

log = logging.getLogger(__name__)

Key = PartitionKey  # (topic, partition)


@dataclass
class Owned:
    """One partition this server owns."""

    queue: str
    topic: str
    partition: int
    projector: PartitionProjector
    buffer: ReadyBuffer
    # The partition serves once its projection has reached this offset.
    target: int
    serving: bool = False
    # The enqueue's W3C traceparent of the jobs the buffer holds and of the jobs this
    # owner claimed that are still IN_PROGRESS: handed to the worker with the job and
    # linked from claim and ack spans (the projection has every job's).
    traceparents: dict[int, str] = field(default_factory=dict)
    # (local_id, touched_at) of the claims whose timeout was appended and is on its way
    # through the log (maintenance/claim_timeouts.py), so it is not appended twice.
    timing_out: set[tuple[int, int | None]] = field(default_factory=set)
    # When, by this owner's clock, it saw the claims touched (sightings.py).
    sightings: Sightings = field(default_factory=lambda: Sightings(since=0.0))
    # Retired: drained and empty after a resize closed it (retirement.py); no ready
    # window, no maintenance, no dequeues, until a resize reopens it.
    retired: bool = False
    # The store shard it projects into and serves from (its projector's store): the one
    # it was placed on at adoption, kept until a move is seen (`follow_moves`), so that
    # no refill ever reads a shard still catching up ("": one store).
    shard: str = ""
    # When (monotonic) it was assigned to this server, until it serves: the hand-off
    # time (PARTITION_HANDOFF_SECONDS) is measured from there.
    assigned_at: float | None = None

    @property
    def store(self) -> ProjectorStore:
        return self.projector.store


class _WindowCache:
    """The projector's cache of an owned partition: the jobs its ready buffer holds
    (the listener keeps the buffer current, so there is nothing to absorb)."""

    def __init__(self, lock: threading.Lock, buffer: ReadyBuffer) -> None:
        self._lock = lock
        self._buffer = buffer

    def lookup(self, ids: Iterable[int]) -> dict[int, Job]:
        with self._lock:
            return self._buffer.lookup(ids)

    def absorb(self, jobs: Mapping[int, Job | None]) -> None:
        pass


@dataclass
class _News:
    """Rebalance news from the consumer's callback thread, for the owner thread."""

    revoked: list[Key] = field(default_factory=list)
    assigned: list[Key] = field(default_factory=list)
    # When (monotonic) the last assignment was told.
    assigned_at: float = 0.0


class Partitions:
    def __init__(
        self,
        prefix: str,
        max_priority: int,
        store: LedgerStore,
        kafka: Log,
        metrics: Metrics,
        ledger_metrics: LedgerMetrics,
        on_catalog_change: Callable[[], None],
        window: int = DEFAULT_WINDOW,
        live_traces: LiveTraces | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.prefix = prefix
        # The owner's clock, for the claims' sightings (sightings.py).
        self.clock = clock
        # Each assigned partition's sightings, kept across its reloads (owner thread).
        self._sightings: dict[Key, Sightings] = {}
        # Exports the attempts and jobs that end, while tracing is on.
        self.live_traces = live_traces
        # Ready jobs held per partition, all priorities (PINLEDGER_READY_WINDOW).
        self.window = window
        self.max_priority = max_priority
        self.store = store
        self.kafka = kafka
        self.metrics = metrics
        self.ledger_metrics = ledger_metrics
        self.on_catalog_change = on_catalog_change
        self.catalog_key: Key = (catalog_topic(prefix), 0)
        self.lock = threading.Lock()
        self.owned: dict[Key, Owned] = {}
        self.catalog: CatalogProjectors | None = None
        self._news = _News()
        # When the assignment being adopted was told (0.0: none being adopted).
        self._assigned_at = 0.0
        # Set while a reload after a failed pass has not succeeded yet (loop.py retries).
        self.reload_pending = False
        # Why the last reload failed (the loop logs it).
        self.reload_error: Exception | None = None
        self._reader: GroupReader | None = None
        # Queue -> its first retired partition, for the queues that have retired ones.
        self._retired_from: dict[str, int] = {}
        # Assigned partitions not adopted yet: their store shard is not known yet (their
        # queue's creation or resize is not projected yet), or it does not answer. Tried
        # again every half second (`adopt_waiting`).
        self._waiting: set[Key] = set()
        self._waiting_tried = 0.0
        # Those of them whose store holds no offset (their queue's creation or growth is
        # not projected yet, or it was deleted): their offsets are read on every pass, so
        # a new queue serves as soon as the catalog's projection has it.
        self._unknown: set[Key] = set()
        # When reading the end offsets for reservations in doubt last failed (None: it
        # did not), so that a log that is down is not asked on every pass.
        self._doubts_failed_at: float | None = None
        # Partitions paused at a record their store refuses or no release decodes, and
        # those narrowing a refused batch down to that record (paused.py).
        self.pauses = Pauses(metrics, clock.monotonic)

    def catalog_stores(self) -> Sequence[ProjectorStore]:
        """Where the catalog is projected: every store shard, as the shard map has them
        now (decision 0031); the one store of a store that is one database."""
        return tuple(self.store.shards().values())

    @property
    def isolated(self) -> bool:
        """On several store shards, one shard that does not answer pauses only its own
        partitions (`pause`); on one store, its failure fails the owner's pass, which
        reloads every partition once the store answers (loop.py)."""
        return len(self.catalog_stores()) > 1

    def set_retired(self, retired_from: dict[str, int]) -> None:
        """Which partitions are retired (queue -> the first of them), from the catalog
        projection; any thread."""
        with self.lock:
            if retired_from == self._retired_from:
                return
            self._retired_from = retired_from
            for owned in self.owned.values():
                was = owned.retired
                owned.retired = _retired(owned.queue, owned.partition, retired_from)
                if owned.retired != was:
                    state = "retired" if owned.retired else "reopened"
                    log.info("%s[%d] %s", owned.topic, owned.partition, state)

    def retired_from(self, queue: str) -> int | None:
        """The queue's first retired partition, or None."""
        with self.lock:
            return self._retired_from.get(queue)

    def attach(self, reader: GroupReader) -> None:
        """The group reader whose assignment this follows (made at start, with
        `revoked` and `assigned` as its callbacks)."""
        self._reader = reader

    @property
    def reader(self) -> GroupReader:
        assert self._reader is not None, "the owner has not started"
        return self._reader

    # -- rebalance callbacks (consumer I/O thread: no blocking work) ----------------

    def revoked(self, keys: list[Key]) -> None:
        with self.lock:
            for key in keys:
                owned = self.owned.get(key)
                if owned is not None:
                    owned.serving = False
            self._news.revoked.extend(keys)

    def assigned(self, keys: list[Key]) -> None:
        at = self.clock.monotonic()
        with self.lock:
            self._news.assigned.extend(keys)
            self._news.assigned_at = at
        self.metrics.count(catalogue.GROUP_REBALANCES_TOTAL)

    # -- the owner thread ---------------------------------------------------------------

    def rebalance(self) -> None:
        """Act on the rebalance news: drop what is no longer assigned, adopt what is."""
        with self.lock:
            news, self._news = self._news, _News()
        if not news.assigned:
            # Revocation alone (the first half of an eager rebalance) only stops serving,
            # which the callback did; the buffers wait for the new assignment.
            return
        assigned = set(news.assigned)
        for key in list(self.owned):
            if key not in assigned:
                self.drop(key)
        for key in [k for k in self._sightings if k not in assigned]:
            del self._sightings[key]
        self.pauses.keep_only(assigned)
        catalog = self.catalog_key
        if catalog not in assigned:
            self.catalog = None
        keys = [key for key in news.assigned if key != catalog]
        self._waiting.intersection_update(assigned)
        # The catalog first: partitions whose placement is not projected yet wait for it.
        if catalog in assigned:
            self._adopt_catalog()
        try:
            stored = self.store.offsets(keys)
        except StoreUnavailableError:
            if not self.isolated:
                raise
            stored = {}  # each partition is read from its shard when adopted
        ends = self.end_offsets(keys)
        self._assigned_at = news.assigned_at
        try:
            for key in keys:
                if key in self.pauses.paused:
                    self.drop(key)  # tried again when its time comes (`retry_paused`)
                    continue
                self._adopt_placed(key, stored.get(key), ends.get(key, 0))
        finally:
            self._assigned_at = 0.0
        self.metrics.set_gauge(catalogue.OWNED_PARTITIONS, float(len(self.owned)))

    def _adopt_placed(self, key: Key, stored: int | None, end: int) -> None:
        try:
            self._adopt(key, stored, end)
        except PartitionGoneError as exc:
            # Adopt nothing the catalog lacks (decision 0032): a deleted queue's topic
            # until the rebalance that follows its deletion, or a new queue until its
            # creation is projected. Never projected from an offset made up here.
            self.drop(key)
            if key not in self._waiting:
                log.info("%s; %s[%d] waits for it", exc, key[0], key[1])
            self._waiting.add(key)
            self._unknown.add(key)
        except PlacementUnknownError as exc:
            if key not in self._waiting:
                log.info("%s[%d] waits for its placement: %s", key[0], key[1], exc)
            self._waiting.add(key)
        except StoreUnavailableError as exc:
            if not self.isolated:
                raise
            if key not in self._waiting:
                log.warning("%s[%d] waits for its store shard: %s", key[0], key[1], exc)
            self._waiting.add(key)
        else:
            self._waiting.discard(key)

    def pause(self, key: Key, exc: StoreUnavailableError) -> bool:
        """A partition whose store shard did not answer stops serving and is adopted
        again once the shard answers (`adopt_waiting`), while the others go on; False
        on one store, where the caller's pass fails instead (owner thread)."""
        if not self.isolated:
            return False
        log.warning(
            "%s[%d] paused: %s; it serves again once its store shard answers",
            key[0],
            key[1],
            exc,
        )
        self.drop(key)
        self._waiting.add(key)
        return True

    def adopt_waiting(self, now: float, every_s: float = 0.5) -> None:
        """Adopt the assigned partitions that were waiting for their store shard, once
        the catalog projection places them and the shard answers; project the catalog
        again into a shard that answers again (owner thread, at most every `every_s`:
        each try reads a shard)."""
        if self.catalog is not None:
            if self.catalog.shards != len(self.catalog_stores()):
                self._adopt_catalog()  # a shard was added to the map: it gets the catalog
            elif self.catalog.revive():
                self.reader.seek(self.catalog.topic, 0, self.catalog.next_offset)
        if not self._waiting:
            return
        if now - self._waiting_tried < every_s and not self._offsets_appeared():
            return
        self._waiting_tried = now
        # A revocation's first half leaves `_waiting` as it was (rebalance prunes it on
        # the assignment that follows): adopt only what is still assigned.
        self._waiting.intersection_update(self.reader.assignment())
        self._unknown.intersection_update(self._waiting)
        keys = sorted(self._waiting)
        ends = self.end_offsets(keys)
        for key in keys:
            if key in self.owned:
                self._waiting.discard(key)
            else:
                self._unknown.discard(key)
                self._adopt_placed(key, None, ends.get(key, 0))

    def _offsets_appeared(self) -> bool:
        """Whether a partition waiting for its offset has one now (one read of the
        store, only while one waits)."""
        unknown = [key for key in self._unknown if key in self._waiting]
        if not unknown:
            return False
        try:
            return bool(self.store.offsets(unknown))
        except StoreError:
            return False  # tried again at the half second

    def drop(self, key: Key) -> None:
        with self.lock:
            owned = self.owned.pop(key, None)
        if owned is not None:
            self.ledger_metrics.forget(owned.queue, owned.partition)

    def _adopt_catalog(self) -> None:
        self.catalog = CatalogProjectors(self.catalog_stores(), self.prefix)
        self.reader.seek(self.catalog.topic, 0, self.catalog.next_offset)

    def _adopt(self, key: Key, stored: int | None, end: int) -> None:
        """Own a partition: keep the buffer when it was ours and nobody projected it
        since (a rebalance that handed it straight back), else load a window of its
        next ready jobs from Postgres (never the backlog). It serves once projected up
        to `end`, the log's end at assignment."""
        topic, partition = key
        queue = queue_of_topic(self.prefix, topic)
        if queue is None:
            return
        current = self.owned.get(key)
        if current is not None and current.projector.next_offset == stored:
            with self.lock:
                current.target = end
                current.serving = current.projector.next_offset >= end
            self.reader.seek(topic, partition, current.projector.next_offset)
            return
        # The store shard it projects into and serves from (the one store: itself).
        shard, store = self.store.placed_store(queue, partition)
        buffer = ReadyBuffer(self.max_priority, self.window, from_store=True)
        projector = PartitionProjector(
            store,
            queue,
            topic,
            partition,
            listener=self._listener(key),
            observer=self._observer(key, queue, partition),
            cache=_WindowCache(self.lock, buffer),
        )
        sightings = self._sightings.setdefault(key, Sightings(since=self.clock.monotonic()))
        owned = Owned(
            queue,
            topic,
            partition,
            projector,
            buffer,
            target=end,
            shard=shard,
            sightings=sightings,
            # A partition adopted later (it waited for its shard or placement, or it
            # moved between shards) counts from its adoption.
            assigned_at=self._assigned_at or self.clock.monotonic(),
        )
        with self.lock:
            owned.retired = _retired(queue, partition, self._retired_from)
        self._refill(owned)
        self.metrics.count(catalogue.PARTITION_HANDOFFS_TOTAL)
        with self.lock:
            # Again, in the block that makes it owned: `set_retired` may have changed
            # the map since, and it only updates the partitions in `owned`.
            owned.retired = _retired(queue, partition, self._retired_from)
            self.owned[key] = owned
        self.reader.seek(topic, partition, projector.next_offset)
        log.info(
            "owning %s[%d] from offset %d (%d ready jobs held; serving after offset %d)",
            topic,
            partition,
            projector.next_offset,
            len(buffer),
            end,
        )

    def follow_moves(self) -> None:
        """Adopt again each owned partition whose placement moved to another store shard
        (a `PartitionMoved` projected, decision 0031): it stops serving, its window is
        read from the new shard, and it serves again once it has projected into that
        shard up to the log's end (owner thread; the placements are cached, read at
        most every two seconds)."""
        if not self.store.supports_moves():
            return
        moved: list[tuple[Key, str, str]] = []
        for key, owned in list(self.owned.items()):
            try:
                shard = self.store.shard_name(owned.queue, owned.partition)
            except StoreUnavailableError:
                continue  # no placement readable now: it stays where it is
            if shard != owned.shard:
                moved.append((key, owned.shard, shard))
        if moved:
            # Revoked ones (half a rebalance) are left to the assignment that follows.
            assigned = set(self.reader.assignment())
            moved = [m for m in moved if m[0] in assigned]
        if not moved:
            return
        for key, source, target in moved:
            log.info(
                "%s[%d] moved from store shard %r to %r: serving from %r once it has caught up",
                key[0],
                key[1],
                source,
                target,
                target,
            )
            self.drop(key)
        # The ends after the drops: a claim this owner appended before it stopped serving
        # the partition is below them, so it is projected before the partition serves.
        ends = self.end_offsets([key for key, _, _ in moved])
        for key, _, _ in moved:
            self._adopt_placed(key, None, ends.get(key, 0))

    def end_offsets(self, keys: Sequence[Key]) -> dict[Key, int]:
        try:
            return self.kafka.end_offsets(keys)
        except LogError as exc:
            log.warning("cannot read end offsets (%s): serving what Postgres has", exc)
            return {}

    def refill(self) -> None:
        """Refill the ready windows running low (owner thread, between projected
        batches, so Postgres holds exactly what the buffers were told)."""
        for owned in list(self.owned.values()):
            self.refill_or_pause(owned)
        with self.lock:
            held = sum(len(o.buffer) for o in self.owned.values())
        # What the ready windows hold: bounded by the window, whatever the backlog.
        self.metrics.set_gauge(catalogue.READY_JOBS_HELD, float(held))

    def refill_or_pause(self, owned: Owned) -> None:
        try:
            self._refill(owned)
        except StoreUnavailableError as exc:
            if not self.pause((owned.topic, owned.partition), exc):
                raise

    def _refill(self, owned: Owned) -> None:
        with self.lock:
            if owned.retired:
                return
            wanted = owned.buffer.wants()
        for priority, after, room in wanted:
            found = owned.store.ready_jobs(owned.queue, owned.partition, priority, after, room)
            with self.lock:
                if owned.buffer.fill(priority, after, [h.job for h in found], room):
                    for held in found:
                        if held.traceparent and owned.buffer.holds(held.job.local_id):
                            owned.traceparents[held.job.local_id] = held.traceparent
                _forget_unheld(owned, owned.buffer.take_evicted())

    def _listener(self, key: Key) -> Callable[[dict[int, Job | None], set[int]], None]:
        def update(touched: dict[int, Job | None], claimed: set[int]) -> None:
            with self.lock:
                owned = self.owned.get(key)
                if owned is not None:
                    owned.buffer.update(touched, claimed)
                    # A PENDING job the window did not take is only in Postgres now.
                    _forget_unheld(
                        owned,
                        [
                            i
                            for i, job in touched.items()
                            if job is not None and job.state is JobState.PENDING
                        ],
                    )
                    _forget_unheld(owned, owned.buffer.take_evicted())

        return update

    def _observer(
        self, key: Key, queue: str, partition: int
    ) -> Callable[[Sequence[Transition]], None]:
        # The projector calls the observer before the listener, so a job's trace
        # context is recorded before the ready buffer can hand the job out.
        def observe(transitions: Sequence[Transition]) -> None:
            self.ledger_metrics.observe(queue, partition, transitions)
            owned = self.owned.get(key)
            if owned is None:
                return
            if otel.active():
                rejected_spans(queue, partition, transitions, owned.traceparents)
                if self.live_traces is not None:
                    self.live_traces.observe(queue, partition, transitions, owned.traceparents)
            traceparents = owned.traceparents
            seen = self.clock.monotonic()
            with self.lock:  # dequeues read them under the lock
                for t in transitions:
                    if t.after is None or t.after.state in FINISHED:
                        traceparents.pop(t.local_id, None)
                    elif t.traceparent and isinstance(t.event, Enqueued) and t.verdict.applied:
                        traceparents[t.local_id] = t.traceparent
                owned.sightings.note(transitions, seen)

        return observe

    def project(self, records: Sequence[LogRecord]) -> None:
        by_key: dict[Key, list[LogRecord]] = {}
        for record in records:
            by_key.setdefault((record.topic, record.partition), []).append(record)
        catalog_key = self.catalog_key
        for key, batch in by_key.items():
            batch.sort(key=lambda r: r.offset)
            try:
                if key == catalog_key:
                    self._project_catalog(batch)
                    continue
                owned = self.owned.get(key)
                if owned is not None:
                    self._project_owned(key, owned, batch)
            except StoreUnavailableError as exc:
                if key == catalog_key or not self.pause(key, exc):
                    raise
            except PartitionGoneError as exc:
                # The rebalance that follows the topic's deletion revokes it for good;
                # until then it waits: a queue created again under the name has an
                # offset again once its creation is projected.
                log.info("%s; no longer owning it", exc)
                self.drop(key)
                self.pauses.forget(key)
                # Or it moved to another shard, and the old one's rows went before this
                # owner saw the move: adopted again from where it is placed.
                self.store.forget_placements()
                self._waiting.add(key)
            except FencedError as exc:
                log.warning("%s; reloading it from Postgres", exc)
                if key == catalog_key:
                    self._adopt_catalog()
                    continue
                self.drop(key)
                if self._still_assigned(key):
                    self._adopt_placed(key, None, self.end_offsets([key]).get(key, 0))

    # -- records no store commits (paused.py; decision 0032) ------------------------------

    def _project_owned(self, key: Key, owned: Owned, batch: list[LogRecord]) -> None:
        """Project an owned partition's records. A refusal (a store's plain StoreError,
        or a record no release decodes) stops only this partition: a batch of several
        records is narrowed down to the refused one (projected one record per commit),
        and the partition pauses before it. Every other error is the caller's."""
        projector = owned.projector
        until = self.pauses.narrowing(key)
        fresh = [r for r in batch if r.offset >= projector.next_offset]
        alone = [r for r in fresh if until is not None and r.offset < until]
        together = fresh[len(alone) :]
        for record in alone:
            if not self._applied_or_paused(key, owned, record):
                return
            self.pauses.projected(key, projector.next_offset, projector.skips)
        if len(together) == 1:
            if not self._applied_or_paused(key, owned, together[0]):
                return
        elif together:
            try:
                projector.apply(together)
            except (StoreError, CodecError) as exc:
                if isinstance(exc, StoreUnavailableError | FencedError):
                    raise
                self.pauses.narrow(key, together[0].offset, together[-1].offset + 1, exc)
                self._adopt_again(key)
                return
        self.pauses.projected(key, projector.next_offset, projector.skips)

    def _applied_or_paused(self, key: Key, owned: Owned, record: LogRecord) -> bool:
        """Project one record; False when it was refused and the partition paused."""
        try:
            owned.projector.apply([record])
        except (StoreError, CodecError) as exc:
            if isinstance(exc, StoreUnavailableError | FencedError):
                raise
            # Dropped: its ready buffer was told the record before the commit.
            self.drop(key)
            self.pauses.pause(key, owned.queue, record.offset, exc)
            return False
        return True

    def _adopt_again(self, key: Key) -> None:
        """Drop the partition and adopt it again from the store: what a failed commit told
        its ready buffer goes (the listener is told before the commit, decision 0020)."""
        self.drop(key)
        if self._still_assigned(key):
            self._adopt_placed(key, None, self.end_offsets([key]).get(key, 0))

    def retry_paused(self) -> None:
        """Adopt again the paused partitions whose next try has come, or whose record
        their store says was skipped (owner thread, each pass): each projects its paused
        record alone first."""
        for paused in self.pauses.to_check():
            key = (queue_topic(self.prefix, paused.queue), paused.partition)
            try:
                skipped = self.store.skipped_records(paused.queue, paused.partition)
            except StoreError:
                continue  # asked again later; the backoff's tries go on meanwhile
            if paused.offset in skipped:
                self.pauses.try_now(key)
        due = self.pauses.due()
        if not due:
            return
        assigned = set(self.reader.assignment())
        for key in due:
            if key not in assigned:
                self.pauses.forget(key)  # its new owner pauses it, if it must
                continue
            if key in self.owned:
                continue  # a try under way
            self.pauses.retrying(key)
            self._adopt_again(key)

    def _skips_projected(self, skips: Sequence[RecordSkipped]) -> None:
        """Skips the catalog projection committed: a partition paused at one of them is
        tried again in this pass (`retry_paused`, after the pass's records: this poll's
        records of it begin past the offset it was paused at, and must not be applied
        to it adopted again); an owned one that has not reached it passes over it."""
        for skip in skips:
            key = (queue_topic(self.prefix, skip.name), skip.partition)
            owned = self.owned.get(key)
            if owned is not None and owned.projector.next_offset <= skip.offset:
                owned.projector.skips.setdefault(skip.offset, stored_reason(skip.reason))
            self.pauses.try_now(key)

    def paused(self) -> dict[str, str]:
        """The partitions paused here, "queue[partition]" -> what and what to do (any
        thread)."""
        return self.pauses.described()

    def _project_catalog(self, batch: list[LogRecord]) -> None:
        if self.catalog is None:
            return
        if self.catalog.apply(batch):
            self._catalog_changed()
        self._skips_projected(self.catalog.take_skipped())

    def _catalog_changed(self) -> None:
        try:
            self.on_catalog_change()
        except StoreUnavailableError as exc:
            if not self.isolated:
                raise
            # The home shard is down: the queue directory catches up on its own refresh.
            log.warning("cannot read the queues after a catalog change: %s", exc)

    def _still_assigned(self, key: Key) -> bool:
        return key in self.reader.assignment()

    def promote(self) -> None:
        """Partitions whose projection caught up start serving."""
        now = self.clock.monotonic()
        took: list[float] = []
        with self.lock:
            for owned in self.owned.values():
                if not owned.serving and owned.projector.next_offset >= owned.target:
                    owned.serving = True
                    if owned.assigned_at is not None:
                        took.append(now - owned.assigned_at)
                        owned.assigned_at = None
                    log.info("serving %s[%d]", owned.topic, owned.partition)
        if took:
            self.metrics.observe_many(catalogue.PARTITION_HANDOFF_SECONDS, took)

    def settle_doubts(self, now: float, every_s: float = 1.0) -> None:
        """Hand out again the jobs whose claim append failed without saying whether it
        landed (claims.py), once the projection has passed the partition's end offset
        read after the failure without projecting their claim (owner thread, after
        projecting). The end is read once per doubt; while it cannot be read (Kafka
        down) they stay reserved, and it is read again at most every `every_s`."""
        with self.lock:
            unread = [
                (key, doubt) for key, o in self.owned.items() for doubt in o.buffer.unread_doubts()
            ]
            doubtful = unread or any(o.buffer.doubts for o in self.owned.values())
        if not doubtful:
            return
        if unread and (self._doubts_failed_at is None or now - self._doubts_failed_at >= every_s):
            try:
                # Read after each doubt was recorded, so after its append failed.
                ends = self.kafka.end_offsets(sorted({key for key, _ in unread}))
            except LogError as exc:
                if self._doubts_failed_at is None:
                    log.warning(
                        "cannot read end offsets (%s): jobs whose claim append failed stay "
                        "reserved until they can be read",
                        exc,
                    )
                self._doubts_failed_at = now
            else:
                self._doubts_failed_at = None
                with self.lock:
                    for key, doubt in unread:
                        # A topic gone (its queue deleted) has no jobs left to hand out.
                        doubt.end = ends.get(key, 0)
        with self.lock:
            for owned in self.owned.values():
                if not owned.buffer.doubts:
                    continue
                released = owned.buffer.settle(owned.projector.next_offset)
                if released:
                    log.info(
                        "%s[%d]: %d job(s) whose claim append failed are handed out again: "
                        "the projection passed the log's end without their claim",
                        owned.topic,
                        owned.partition,
                        released,
                    )

    def reload_all(self) -> bool:
        """Forget every owned partition and adopt the current assignment again, from
        Postgres (after a failed pass of the owner loop). False when that failed too (the
        store or the log still down): `reload_pending` stays set and the owner loop
        tries again on its next pass, until it works; a failed reload must never leave
        the assignment unserved until the group's next rebalance."""
        self.reload_pending = True
        with self.lock:
            self.owned.clear()
        self.catalog = None
        self._waiting.clear()
        self._unknown.clear()
        if self._reader is None:
            return False
        try:
            with self.lock:
                self._news.assigned = list(self._reader.assignment())
            self.rebalance()
        except Exception as exc:
            # Nothing adopted half way is kept: the next try starts from scratch.
            with self.lock:
                self.owned.clear()
            self.catalog = None
            self.reload_error = exc
            return False
        self.reload_pending = False
        self.reload_error = None
        log.info("reloaded %d owned partition(s)", len(self.owned))
        return True

    # -- what other threads read (under the lock) --------------------------------------

    def serving(self) -> list[Owned]:
        """The partitions serving now (a snapshot of the list)."""
        with self.lock:
            return [o for o in self.owned.values() if o.serving]

    def working(self) -> list[Owned]:
        """The partitions serving now that are not retired: what maintenance visits."""
        with self.lock:
            return [o for o in self.owned.values() if o.serving and not o.retired]

    def projected(self) -> dict[Key, int]:
        """Each owned partition's next offset to project."""
        with self.lock:
            return {key: o.projector.next_offset for key, o in self.owned.items()}

    def all_serving(self, keys: Sequence[Key]) -> bool:
        """Whether each of these partitions is owned here and serving."""
        with self.lock:
            return all(key in self.owned and self.owned[key].serving for key in keys)


def _retired(queue: str, partition: int, retired_from: Mapping[str, int]) -> bool:
    first = retired_from.get(queue)
    return first is not None and partition >= first


def _forget_unheld(owned: Owned, ids: Iterable[int]) -> None:
    """Drop the trace contexts of these jobs unless the buffer holds them (call with
    the lock held)."""
    for local_id in ids:
        if not owned.buffer.holds(local_id):
            owned.traceparents.pop(local_id, None)
