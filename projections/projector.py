"""Projects the log into Postgres: decode records, fold them through `evolve`, and
commit the rows with the partition's offset in one transaction.

The same code serves the live projection and `pinledger replay` (into a scratch
schema): there is no second rebuild implementation, so a replay that differs from the
live tables points at a real problem (a changed state machine, a lost write), never
at a second implementation drifting apart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from pinledger.ledger import codec
from pinledger.ledger.events import (
    CatalogEvent,
    Claimed,
    Enqueued,
    Envelope,
    JobEvent,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    Placement,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    QueueResized,
    RecordSkipped,
    ScheduleTicked,
)
from pinledger.ledger.log import Log, LogRecord, Position, Reader, catalog_topic, queue_topic
from pinledger.ledger.state import (
    FINISHED,
    Job,
    Stamp,
    Verdict,
    event_local_id,
    evolve,
    key_holder,
)
from pinledger.projections.skips import Skips, catalog_skips, stored_reason
from pinledger.projections.store import (
    ImportedJob,
    PartitionBatch,
    ProjectorStore,
    QueueRow,
    ScheduleTick,
    StoreUnavailableError,
)
from pinledger.projections.timeline_rows import timeline_row, turned_away_row

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Bound:
    """Where a replay stops in each partition: before `offset` (exclusive) and before
    the first record stamped after `at` (ms). None means the end of the log."""

    offset: int | None = None
    at: int | None = None

    def excludes(self, offset: int, at: int) -> bool:
        return (self.offset is not None and offset >= self.offset) or (
            self.at is not None and at > self.at
        )


UNBOUNDED = Bound()


# Told, for each batch just before its commit, every job the batch touched (None =
# removed) and the ids claim records named: how a partition owner keeps its ready buffer
# current.
Listener = Callable[[dict[int, Job | None], set[int]], None]


class Transition(NamedTuple):
    """One event as `evolve` judged it in a batch being committed: what observers (ledger
    metrics, spans linking to each job's enqueue) derive from, so that no second place
    decides how a job changes. A named tuple: one is built per projected event."""

    local_id: int
    event: JobEvent
    before: Job | None
    after: Job | None
    verdict: Verdict
    at: int
    # The W3C trace context of the record that carried the event, if it had one.
    traceparent: str | None


# Told, for each batch just before its commit (before the listener), every transition
# in it. A batch whose commit fails is told again when it is projected again.
Observer = Callable[[Sequence[Transition]], None]


class JobCache(Protocol):
    """Jobs a projector finds in memory instead of reading them from the store. What it
    holds is the cache's choice; each must be the job as the projection last applied
    it (the store has the rest, read in one query per batch)."""

    def lookup(self, ids: Iterable[int]) -> dict[int, Job]:
        """The cached jobs among `ids`."""
        ...

    def absorb(self, jobs: Mapping[int, Job | None]) -> None:
        """Jobs after a committed batch (None: removed)."""
        ...


class UnfinishedJobs:
    """Keeps every unfinished job the projector has seen: a replay's cache (a partition
    owner keeps a bounded window instead, service/ownership/partitions.py)."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}

    def lookup(self, ids: Iterable[int]) -> dict[int, Job]:
        jobs = self.jobs
        return {i: jobs[i] for i in ids if i in jobs}

    def absorb(self, jobs: Mapping[int, Job | None]) -> None:
        for local_id, job in jobs.items():
            if job is None or job.state in FINISHED:
                self.jobs.pop(local_id, None)
            else:
                self.jobs[local_id] = job


class PartitionProjector:
    """Projects one partition of one queue. The jobs its `cache` holds are read from
    memory; others are loaded from the projection when an event names them (by default
    every unfinished job stays cached).

    The records an operator skipped (`skips`, offset -> why: decision 0032) are passed
    over: the offset moves past them and nothing of them is applied, not even a
    timeline row (the record may name no job, or hold what the store refuses; the
    catalog's `skipped_records` are its trace). By default they are read from the
    store's catalog projection; what reads the catalog from the log passes them."""

    def __init__(
        self,
        store: ProjectorStore,
        queue: str,
        topic: str,
        partition: int,
        bound: Bound = UNBOUNDED,
        listener: Listener | None = None,
        observer: Observer | None = None,
        cache: JobCache | None = None,
        skips: Mapping[int, str] | None = None,
    ) -> None:
        self.store = store
        self.listener = listener
        self.observer = observer
        self._transitions: list[Transition] = []
        self.queue = queue
        self.topic = topic
        self.partition = partition
        self.bound = bound
        self.next_offset = store.offset(topic, partition)
        self.done = False
        self.cache: JobCache = UnfinishedJobs() if cache is None else cache
        self.skips: dict[int, str] = dict(
            store.skipped_records(queue, partition) if skips is None else skips
        )

    def apply(self, records: Sequence[LogRecord]) -> int:
        """Project records of this partition (in offset order); returns how many events
        were applied or rejected. Records below `next_offset` are redeliveries: skipped."""
        fresh, end = self._fresh(records)
        if end is None:
            return 0
        batch = PartitionBatch(
            queue=self.queue,
            topic=self.topic,
            partition=self.partition,
            expected_offset=self.next_offset,
            next_offset=end,
        )
        self._transitions = []  # a failed commit's transitions are not told
        before, working = self._fold(fresh, batch)
        for local_id, job in working.items():
            if job is before[local_id]:
                continue
            if job is None:
                batch.removals.append(local_id)
            else:
                batch.upserts.append(job)
        # Told before the commit (decision 0020): a job consumed from the log is durable
        # there already, so its owner may hand it out while Postgres is being written.
        # A commit that then fails reloads the partition, which serves again only once
        # it has projected past every claim appended meanwhile.
        if self.observer is not None:
            # Before the listener: what observers keep per job (an owner's trace
            # contexts) is in place before the ready buffer can hand the job out.
            transitions, self._transitions = self._transitions, []
            self.observer(transitions)
        if self.listener is not None:
            claimed = {
                event.local_id
                for _, part in fresh
                for event in part.envelope.events
                if isinstance(event, Claimed)
            }
            self.listener(working, claimed)
        self.store.commit_partition_batch(batch)
        self.next_offset = batch.next_offset
        self.cache.absorb(working)
        return len(batch.events)

    def _fresh(
        self, records: Sequence[LogRecord]
    ) -> tuple[list[tuple[LogRecord, codec.Part]], int | None]:
        """The envelopes of the records not yet projected, within the bound (a group
        record's envelopes are bounded one by one: each has its own time), and the
        offset the batch ends before (None: nothing to commit). A skipped record is
        not decoded: it ends the batch after it all the same."""
        fresh: list[tuple[LogRecord, codec.Part]] = []
        end: int | None = None
        for record in records:
            if record.offset < self.next_offset or self.done:
                continue
            if record.offset in self.skips:
                if self.bound.offset is not None and record.offset >= self.bound.offset:
                    self.done = True
                    break
                log.info(
                    "%s[%d]@%d passed over: an operator skipped it (%s)",
                    self.topic,
                    self.partition,
                    record.offset,
                    self.skips[record.offset] or "no reason given",
                )
                end = record.offset + 1
                continue
            for part in codec.decode_parts(record.value, record.headers):
                if self.bound.excludes(record.offset, part.envelope.at):
                    self.done = True
                    return fresh, end
                fresh.append((record, part))
                end = record.offset + 1
        return fresh, end

    def _fold(
        self, fresh: list[tuple[LogRecord, codec.Part]], batch: PartitionBatch
    ) -> tuple[dict[int, Job | None], dict[int, Job | None]]:
        """Apply every event through `evolve`, recording the timeline rows in `batch`.
        Returns each touched job before and after the batch."""
        named = {
            event.local_id
            for _, part in fresh
            for event in part.envelope.events
            if not isinstance(event, Enqueued | CatalogEvent)
        }
        # One cache lookup and at most one store read per batch. An Enqueued's id is
        # new (it comes from its own record's offset): neither has it.
        cached = self.cache.lookup(named)
        before: dict[int, Job | None] = dict(
            self.store.load_jobs(self.queue, self.partition, named - cached.keys())
        )
        before.update(cached)
        keyed = self._keyed(fresh, before)
        working: dict[int, Job | None] = {}
        for record, part in fresh:
            envelope = part.envelope
            stamp = Stamp(envelope.at, envelope.actor)
            traceparent = part.traceparent
            for idx, event in enumerate(envelope.events, start=part.first):
                if isinstance(event, CatalogEvent):
                    log.warning(
                        "%s[%d]@%d: queue event in a queue partition, ignored",
                        self.topic,
                        self.partition,
                        record.offset,
                    )
                    continue
                local_id = event_local_id(event, record.offset, idx)
                if local_id not in working:
                    before.setdefault(local_id, None)
                    working[local_id] = before[local_id]
                prior = working[local_id]
                holder = None
                if keyed is not None and isinstance(event, Enqueued) and event.unique_key:
                    ids = keyed.setdefault(event.unique_key, set())
                    holder = key_holder(event, stamp, (working.get(i, before.get(i)) for i in ids))
                    if holder is None:
                        ids.add(local_id)
                after, verdict = evolve(prior, event, stamp, local_id, holder)
                working[local_id] = after
                if self.observer is not None:
                    self._transitions.append(
                        Transition(local_id, event, prior, after, verdict, envelope.at, traceparent)
                    )
                if isinstance(event, Enqueued) and verdict.applied:
                    if traceparent:
                        batch.traceparents[local_id] = traceparent
                    if event.imported_from is not None:
                        batch.imported[local_id] = ImportedJob(event.imported_from, event.priority)
                batch.events.append(
                    timeline_row(
                        local_id,
                        record.offset,
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
                if holder is not None:
                    batch.events.append(
                        turned_away_row(holder, record.offset, idx, envelope, event, traceparent)
                    )
        return before, working

    def _keyed(
        self, fresh: list[tuple[LogRecord, codec.Part]], before: dict[int, Job | None]
    ) -> dict[str, set[int]] | None:
        """For a batch with keyed enqueues, the partition's jobs of those keys (read in
        one query, added to `before`) by key; None for a batch without any."""
        keys = {
            event.unique_key
            for _, part in fresh
            for event in part.envelope.events
            if isinstance(event, Enqueued) and event.unique_key
        }
        if not keys:
            return None
        keyed: dict[str, set[int]] = {}
        for job in self.store.keyed_jobs(self.queue, self.partition, keys):
            # The cache's copy, when it has one, is the job as last applied: the same.
            before.setdefault(job.local_id, job)
            if job.unique_key is not None:
                keyed.setdefault(job.unique_key, set()).add(job.local_id)
        return keyed


class CatalogProjector:
    """Projects the catalog topic: queue creations, deletions, resizes, retirements,
    placements, skipped records, pauses and periodic jobs' ticks."""

    def __init__(self, store: ProjectorStore, prefix: str, bound: Bound = UNBOUNDED) -> None:
        self.store = store
        self.prefix = prefix
        self.topic = catalog_topic(prefix)
        self.bound = bound
        self.next_offset = store.start_offset(self.topic, 0)
        self.done = False
        # Skipped records committed and not taken yet (`take_skipped`).
        self.skipped: list[RecordSkipped] = []

    def apply(self, records: Sequence[LogRecord]) -> bool:
        """Project catalog records; True when the queues changed (their set, sizes or
        retired partitions)."""
        pending = _CatalogBatch()
        changed = False
        last = None
        for record in records:
            if record.offset < self.next_offset or self.done:
                continue
            envelope = codec.decode(record.value)
            if self.bound.excludes(record.offset, envelope.at):
                self.done = True
                break
            skips = _skips_records(envelope)
            if last is not None and (skips or (pending.sizes and _sizes_queues(envelope))):
                # Resizes and retirements of one batch commit in the order they were
                # appended (a retirement holds only for partitions still closed); so do
                # skips (one holds for a queue's partitions as they are when it comes).
                changed = self._commit(pending, last) or changed
                pending = _CatalogBatch(gone=pending.gone)
            last = record.offset
            pending.add(envelope, self.prefix)
            if skips:
                changed = self._commit(pending, last) or changed
                pending = _CatalogBatch(gone=pending.gone)
                last = None
        if last is None:
            return changed
        return self._commit(pending, last) or changed

    def take_skipped(self) -> list[RecordSkipped]:
        """The skipped records committed since the last call (an owner re-adopts a
        partition paused at one of them)."""
        taken, self.skipped = self.skipped, []
        return taken

    def _commit(self, batch: _CatalogBatch, last: int) -> bool:
        self.store.commit_catalog(
            self.topic,
            self.next_offset,
            last + 1,
            batch.created,
            batch.deleted,
            batch.resized,
            batch.retired,
            batch.placed,
            batch.skipped,
            batch.paused,
            batch.ticks,
        )
        self.next_offset = last + 1
        self.skipped.extend(batch.skipped)
        return bool(batch.created or batch.deleted or batch.sizes or batch.placed)


class CatalogProjectors:
    """The catalog projected into each store shard's own tables (decision 0031): every
    shard holds the queues, their placements and the catalog's offset, so each is a
    whole projection of what is placed on it, replayed and verified alone. Each shard
    keeps its own offset: one that fell behind (it was down) catches up from where it
    is, while the others skip what they have.

    With several shards, a shard that does not answer (StoreUnavailableError) is set
    aside and tried again every `retry_s` (`revive`), so that one shard down does not
    stop the catalog on the others; with one, its error is the caller's, as before."""

    def __init__(
        self,
        stores: Sequence[ProjectorStore],
        prefix: str,
        clock: Callable[[], float] = time.monotonic,
        retry_s: float = 1.0,
    ) -> None:
        self.prefix = prefix
        self.topic = catalog_topic(prefix)
        self._clock = clock
        self._retry_s = retry_s
        self._isolated = len(stores) > 1
        self.shards = len(stores)
        self.projectors: list[CatalogProjector] = []
        # Stores set aside (down), by id, with when to try them again.
        self.waiting: dict[int, tuple[ProjectorStore, float]] = {}
        for store in stores:
            self._start(store)

    def _start(self, store: ProjectorStore) -> bool:
        try:
            self.projectors.append(CatalogProjector(store, self.prefix))
        except StoreUnavailableError as exc:
            self._set_aside(store, exc)
            return False
        self.waiting.pop(id(store), None)
        return True

    def _set_aside(self, store: ProjectorStore, exc: StoreUnavailableError) -> None:
        if not self._isolated:
            raise exc
        if id(store) not in self.waiting:
            log.warning(
                "catalog %s not projected into a store shard: %s; retrying", self.topic, exc
            )
        self.waiting[id(store)] = (store, self._clock() + self._retry_s)

    @property
    def next_offset(self) -> int:
        """Where reading must start for every shard: the one furthest behind (0 while
        none answers)."""
        return min((p.next_offset for p in self.projectors), default=0)

    def apply(self, records: Sequence[LogRecord]) -> bool:
        changed = False
        for projector in list(self.projectors):
            try:
                changed = projector.apply(records) or changed
            except StoreUnavailableError as exc:
                self.projectors.remove(projector)
                self._set_aside(projector.store, exc)
        return changed

    def take_skipped(self) -> list[RecordSkipped]:
        """The skipped records any shard committed since the last call, once each."""
        found = [skip for projector in self.projectors for skip in projector.take_skipped()]
        return list(dict.fromkeys(found))

    def revive(self) -> bool:
        """Try again the shards set aside whose time has come; True when one answered
        (read the catalog again from `next_offset`: it starts behind)."""
        now = self._clock()
        revived = False
        for store, at in list(self.waiting.values()):
            if at <= now and self._start(store):
                log.info("catalog %s projected into the store shard again", self.topic)
                revived = True
        return revived


def _sizes_queues(envelope: Envelope) -> bool:
    return any(isinstance(e, QueueResized | PartitionsRetired) for e in envelope.events)


def _skips_records(envelope: Envelope) -> bool:
    return any(isinstance(e, RecordSkipped) for e in envelope.events)


@dataclass
class _CatalogBatch:
    """Catalog changes to commit in one transaction."""

    created: list[tuple[QueueRow, list[str]]] = field(default_factory=list)
    resized: list[tuple[QueueRow, list[str]]] = field(default_factory=list)
    retired: list[PartitionsRetired] = field(default_factory=list)
    # Placements apply after the batch's creations and resizes: a record that creates or
    # grows a queue places its new partitions.
    placed: list[Placement] = field(default_factory=list)
    # Skipped records (decision 0032), each in a batch of its own record's events.
    skipped: list[RecordSkipped] = field(default_factory=list)
    # Pauses and resumes (decision 0035), in order, after the batch's creations: a
    # record that creates a queue may be followed by one that pauses it.
    paused: list[QueuePaused] = field(default_factory=list)
    # Periodic jobs' ticks (decision 0038), in order, after the batch's creations, each
    # with its record's time: as pauses, a record that creates a queue may be followed by
    # one that ticks its schedule.
    ticks: list[ScheduleTick] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    # Queues deleted in this batch and not created again since: a resize or retirement
    # of one names no queue (the fold ignores it), though the store would apply it to a
    # queue of that name created later in the batch.
    gone: set[str] = field(default_factory=set)

    @property
    def sizes(self) -> bool:
        return bool(self.resized or self.retired)

    def add(self, envelope: Envelope, prefix: str) -> None:
        for event in envelope.events:
            if isinstance(event, QueueCreated):
                row = QueueRow(event.name, event.partitions, envelope.at)
                self.created.append((row, [queue_topic(prefix, event.name)]))
                self.gone.discard(event.name)
                # Pauses before it named no queue (the fold ignores them), though the
                # store would apply them to the queue created here (decision 0035).
                self.paused = [k for k in self.paused if k.name != event.name]
                self.ticks = [t for t in self.ticks if t.queue != event.name]
            elif isinstance(event, QueueResized) and event.name not in self.gone:
                row = QueueRow(event.name, event.partitions, envelope.at)
                self.resized.append((row, [queue_topic(prefix, event.name)]))
            elif isinstance(event, PartitionsRetired) and event.name not in self.gone:
                self.retired.append(event)
            elif (
                isinstance(event, PartitionPlaced | PartitionMoved) and event.name not in self.gone
            ):
                self.placed.append(event)
            elif isinstance(event, RecordSkipped) and event.name not in self.gone:
                self.skipped.append(event)
            elif isinstance(event, QueuePaused) and event.name not in self.gone:
                self.paused.append(event)
            elif isinstance(event, ScheduleTicked) and event.name not in self.gone:
                self.ticks.append(
                    ScheduleTick(event.name, event.schedule, event.tick_ms, event.job, envelope.at)
                )
            elif isinstance(event, QueueDeleted):
                # A deletion cancels an earlier creation or resize in the same batch.
                self.created = [c for c in self.created if c[0].name != event.name]
                self.resized = [r for r in self.resized if r[0].name != event.name]
                self.retired = [r for r in self.retired if r.name != event.name]
                self.placed = [p for p in self.placed if p.name != event.name]
                self.skipped = [k for k in self.skipped if k.name != event.name]
                self.paused = [k for k in self.paused if k.name != event.name]
                self.ticks = [t for t in self.ticks if t.queue != event.name]
                self.deleted.append((event.name, queue_topic(prefix, event.name)))
                self.gone.add(event.name)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which part of the log to project: all queues, or some; one partition or all."""

    queues: frozenset[str] | None = None
    partition: int | None = None
    bound: Bound = UNBOUNDED
    # Per-partition end offsets (exclusive) on top of `bound`, keyed (topic, partition).
    partition_bounds: dict[tuple[str, int], int] = field(default_factory=dict)
    # Only these (queue, partition) pairs, when given: the partitions placed on one store
    # shard (a replay into a schema, shard by shard: decision 0031). The catalog is
    # projected whole all the same.
    only: frozenset[tuple[str, int]] | None = None

    def bound_for(self, topic: str, partition: int) -> Bound:
        limit = self.partition_bounds.get((topic, partition))
        if limit is None:
            return self.bound
        if self.bound.offset is not None:
            limit = min(limit, self.bound.offset)
        return Bound(offset=limit, at=self.bound.at)

    def covers(self, queue: str, partition: int) -> bool:
        return (
            (self.queues is None or queue in self.queues)
            and (self.partition is None or partition == self.partition)
            and (self.only is None or (queue, partition) in self.only)
        )


class ProjectionRunner:
    """Follows the catalog and every partition of the queues it lists, projecting
    batches as they arrive. One reader, one thread: Postgres batches do the work."""

    def __init__(
        self,
        store: ProjectorStore,
        log_: Log,
        prefix: str,
        scope: Scope | None = None,
        max_records: int = 5000,
        skips: Skips | None = None,
    ) -> None:
        self.store = store
        self.log = log_
        self.prefix = prefix
        self.scope = scope or Scope()
        self.max_records = max_records
        # The records an operator skipped, from the whole catalog before any partition
        # is projected: records arrive in no order across partitions, so a partition's
        # skipped record may come before the catalog's record that skips it (the
        # scratch store's own catalog projection would then not have it yet).
        self.skips: Skips = catalog_skips(log_, prefix) if skips is None else skips
        # Catalog offsets are unrelated to queue partition offsets: bound it by time only.
        self.catalog = CatalogProjector(store, prefix, Bound(at=self.scope.bound.at))
        self.partitions: dict[tuple[str, int], PartitionProjector] = {}
        self._reader: Reader | None = None
        self._sync_partitions()

    def _sync_partitions(self) -> None:
        wanted: dict[tuple[str, int], str] = {}
        for row in self.store.queues():
            topic = queue_topic(self.prefix, row.name)
            for partition in range(row.partitions):
                if self.scope.covers(row.name, partition):
                    wanted[(topic, partition)] = row.name
        for key in list(self.partitions):
            if key not in wanted:
                del self.partitions[key]
        for (topic, partition), queue in wanted.items():
            if (topic, partition) not in self.partitions:
                self.partitions[(topic, partition)] = PartitionProjector(
                    self.store,
                    queue,
                    topic,
                    partition,
                    self.scope.bound_for(topic, partition),
                    skips=self.skips.get((queue, partition), {}),
                )
        if self._reader is not None:
            self._reader.close()
        positions = [Position(self.catalog.topic, 0, self.catalog.next_offset)]
        positions += [
            Position(p.topic, p.partition, p.next_offset) for p in self.partitions.values()
        ]
        self._reader = self.log.reader(positions)

    def step(self, timeout_ms: int = 200) -> int:
        """Poll once and project what arrived; returns the number of job events."""
        assert self._reader is not None
        records = self._reader.poll(self.max_records, timeout_ms)
        by_partition: dict[tuple[str, int], list[LogRecord]] = {}
        for record in records:
            by_partition.setdefault((record.topic, record.partition), []).append(record)
        applied = 0
        catalog_records = by_partition.pop((self.catalog.topic, 0), [])
        for key, batch in by_partition.items():
            projector = self.partitions.get(key)
            if projector is not None:
                applied += projector.apply(sorted(batch, key=lambda r: r.offset))
        if catalog_records and self.catalog.apply(sorted(catalog_records, key=lambda r: r.offset)):
            self._sync_partitions()
        for skip in self.catalog.take_skipped():
            self._skipped(skip)
        return applied

    def _skipped(self, skip: RecordSkipped) -> None:
        """A skip appended while the runner runs (`pinledger project`): its partition's
        projector passes over the record from now on (one that is past it already
        applied it)."""
        reason = stored_reason(skip.reason)
        self.skips.setdefault((skip.name, skip.partition), {}).setdefault(skip.offset, reason)
        projector = self.partitions.get((queue_topic(self.prefix, skip.name), skip.partition))
        if projector is not None:
            projector.skips.setdefault(skip.offset, reason)

    def lag(self) -> dict[tuple[str, int], int]:
        """Records not yet projected, per partition (bounded partitions that are done
        count as caught up)."""
        targets: list[CatalogProjector | PartitionProjector] = [self.catalog]
        targets += [p for p in self.partitions.values() if not p.done]
        keys = [(t.topic, getattr(t, "partition", 0)) for t in targets]
        ends = self.log.end_offsets(keys)
        lag = {}
        for key, projector in zip(keys, targets, strict=True):
            end = ends.get(key, projector.next_offset)
            if projector.bound.offset is not None:
                end = min(end, projector.bound.offset)
            if end > projector.next_offset:
                lag[key] = end - projector.next_offset
        return lag

    def catch_up(
        self, progress: Callable[[int, int], None] | None = None, idle_polls: int = 3
    ) -> int:
        """Project until every partition has reached the end of the log as it was
        when the call started (or its bound). Returns the number of job events."""
        total = 0
        remaining = sum(self.lag().values())
        quiet = 0
        while True:
            applied = self.step()
            total += applied
            if progress is not None:
                progress(total, remaining)
            if applied:
                quiet = 0
                continue
            lag = self.lag()
            if not lag:
                return total
            quiet += 1
            if quiet >= idle_polls * 50:
                raise TimeoutError(f"projection made no progress; still behind: {lag}")

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
