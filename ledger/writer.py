"""Appending to the ledger: turns decided events into records on the right topic and
partition, through the log port. The write side of the data flow; it never reads
the projection.

Records are sized by their encoded bytes (the value as the codec writes it, its
headers and framing: `record_bytes`) against the record limit: the events of one call
to one partition are cut into parts no bigger than a group record (at most
JOBS_PER_RECORD events each), and an event too big for a record of its own is refused
(RecordTooLargeError; an enqueue says which job: ENQUEUE_REJECTED) before anything of
the call is appended. The common call, which fits one record, is encoded once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from pinledger.ledger import codec, formats
from pinledger.ledger.commands import RefusalCode, Refused, check_queue_name
from pinledger.ledger.descriptor import JOBS_PER_RECORD, JobDescriptor, local_id_for
from pinledger.ledger.events import (
    Actor,
    Enqueued,
    Envelope,
    Event,
    FormatRaised,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    QueueResized,
    RecordSkipped,
    ScheduleTicked,
)
from pinledger.ledger.group_commit import AppendTimer, GroupCommit, Part
from pinledger.ledger.log import (
    DEFAULT_MAX_RECORD_BYTES,
    Append,
    Log,
    RecordTooLargeError,
    catalog_topic,
    queue_topic,
)

# What an append is asked for: the events of one queue's partition.
Batch = tuple[str, int, Sequence[Event]]
# Batches with the trace context their records carry.
Traced = tuple[Sequence[Batch], str | None]
# Where new partitions go (service/shards/placement.py): (queue, partitions, created) -> the
# store shard of each partition to place now.
Placer = Callable[[str, int, bool], Mapping[int, str]]


class EventTooLargeError(RecordTooLargeError):
    """One event of a call is too big for a record of its own: nothing of the call was
    appended. `index`: its place among the call's events."""

    def __init__(self, message: str, index: int, size: int, limit: int) -> None:
        super().__init__(message)
        self.index = index
        self.size = size
        self.limit = limit


# The longest schedule name a tick may carry: the stores' key column holds no more
# (MariaDB's schedule_ticks.schedule is a VARCHAR(255)).
MAX_SCHEDULE_NAME = 255


def check_tick(tick: ScheduleTicked) -> None:
    """Refuse a tick no store could project: the catalog would stall on its record
    (Postgres refuses a NUL in text; MariaDB a schedule name longer than its column)."""
    if not tick.schedule or len(tick.schedule) > MAX_SCHEDULE_NAME or "\x00" in tick.schedule:
        raise ValueError(
            f"a schedule name is 1 to {MAX_SCHEDULE_NAME} characters without NUL, "
            f"got {tick.schedule[:40]!r} ({len(tick.schedule)} characters)"
        )
    if "\x00" in tick.job:
        raise ValueError(f"a tick's job descriptor holds no NUL, got {tick.job[:80]!r}")


class LedgerWriter:
    def __init__(
        self, log: Log, prefix: str, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    ) -> None:
        self.log = log
        self.prefix = prefix
        # The newest offset this writer appended per (topic, partition): what a read on
        # this server waits for the projection to reach (read-your-writes).
        self.appended: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        # Plain records only until told the cluster's format (`follow_format`): what
        # every release reads. A server follows the catalog's format; a command that
        # appends without following it (the dashboard's actions, an import) never
        # writes a record some live server could not read.
        self.group = GroupCommit(log, grouping=False, record_limit=max_record_bytes)
        self.cluster_format = formats.PLAIN
        # Places the partitions a creation or resize adds on store shards (decision
        # 0031); None, or a map of one shard: every partition on the one store.
        self.placer: Placer | None = None

    def topic(self, queue: str) -> str:
        return queue_topic(self.prefix, queue)

    @property
    def max_record_bytes(self) -> int:
        """The largest record this writer appends (`record_bytes`)."""
        return self.group.record_limit

    def time_appends(self, timer: AppendTimer) -> None:
        """Tell `timer` how long each append to the log takes (group commits, catalog
        records and records of their own alike)."""
        self.group.on_append = timer

    def limit_records(self, max_message_bytes: int) -> bool:
        """Write no record over `max_message_bytes` (a topic's max.message.bytes, read
        at start); False when the limit was that low already."""
        if max_message_bytes >= self.group.record_limit:
            return False
        self.group.record_limit = max_message_bytes
        return True

    def follow_format(self, cluster_format: int) -> None:
        """Write what the cluster's ledger format allows (ledger/formats.py): group
        records from format 2 on."""
        self.group.grouping = cluster_format >= formats.GROUPED
        self.cluster_format = cluster_format

    def ensure_catalog(self, at: int, actor: Actor) -> None:
        """Create the catalog topic when it is missing. A catalog created here starts at
        the newest ledger format: no server of an older release can be live in a
        cluster that had no catalog. It keeps its records forever, whatever the
        retention: a few per queue, and the cluster's ledger format (decision 0025)."""
        if self.log.create_topic(catalog_topic(self.prefix), 1, keep_forever=True):
            self.raise_format(formats.LATEST, at, actor)

    def raise_format(self, cluster_format: int, at: int, actor: Actor) -> None:
        """Record the cluster's ledger format in the catalog (`pinledger
        upgrade-format` checks first that every live server reads it)."""
        self._append_catalog(FormatRaised(format=cluster_format), at, actor)

    def create_queue(self, name: str, partitions: int, at: int, actor: Actor) -> bool:
        """Create the queue's topic, then record the queue in the catalog. False when the
        topic existed already (createQueue is idempotent)."""
        check_queue_name(name)
        if partitions < 1:
            raise ValueError(f"a queue needs at least one partition, got {partitions}")
        self.ensure_catalog(at, actor)
        # Placed before the topic exists: a store that cannot say fails the call with
        # nothing created, so the caller's retry creates the queue.
        placed = self._placements(name, partitions, new=True)
        if not self.log.create_topic(self.topic(name), partitions):
            return False
        self._append_catalog(QueueCreated(name=name, partitions=partitions), at, actor, placed)
        return True

    def resize_queue(self, name: str, partitions: int, at: int, actor: Actor, reason: str) -> None:
        """Give the queue's topic at least `partitions` partitions (Kafka's first, so
        that no record ever names a partition the topic lacks), then record that the
        queue takes jobs on that many. Only when the cluster's ledger format has queue
        resizes (format 2): a server of an older release could not read the record."""
        check_queue_name(name)
        if partitions < 1:
            raise ValueError(f"a queue needs at least one partition, got {partitions}")
        self._require(formats.RESIZES, "resizing a queue")
        placed = self._placements(name, partitions, new=False)
        self.log.add_partitions(self.topic(name), partitions)
        self._append_catalog(QueueResized(name, partitions, reason), at, actor, placed)

    def retire_partitions(self, name: str, first: int, at: int, actor: Actor, reason: str) -> None:
        """Record that the queue's partitions `first` and above are retired (drained and
        empty; `first` equal to the partition count: none are). Written only after a
        resize, so only on a cluster at ledger format 2 or later; checked all the same."""
        check_queue_name(name)
        self._require(formats.RESIZES, "retiring partitions")
        self._append_catalog(PartitionsRetired(name, first, reason), at, actor)

    def move_partition(self, move: PartitionMoved, at: int, actor: Actor) -> None:
        """Record that a partition's projection moves to another store shard (decision
        0031), on a cluster whose ledger format has moves (format 2)."""
        check_queue_name(move.name)
        self._require(formats.MOVES, "moving a partition")
        self._append_catalog(move, at, actor)

    def skip_record(self, skip: RecordSkipped, at: int, actor: Actor) -> None:
        """Record that a queue record is never applied (`pinledger skip-record`), on a
        cluster whose ledger format has skips (format 3): a server of an older release
        would not read the catalog record, and would stall on the skipped one."""
        check_queue_name(skip.name)
        self._require(formats.SKIPS, "skipping a record")
        self._append_catalog(skip, at, actor)

    def pause_queue(self, pause: QueuePaused, at: int, actor: Actor) -> None:
        """Record that the queue's jobs are held back (or handed out again), on a
        cluster whose ledger format has pauses (format 3): a server of an older release
        would not read the record, and would go on handing out the queue's jobs."""
        check_queue_name(pause.name)
        self._require(formats.PAUSES, "pausing or resuming a queue")
        self._append_catalog(pause, at, actor)

    def record_tick(self, tick: ScheduleTicked, at: int, actor: Actor) -> None:
        """Record a periodic job's tick as enqueued (or where its schedule began), on a
        cluster whose ledger format has schedules (format 3)."""
        check_queue_name(tick.name)
        check_tick(tick)
        self._require(formats.SCHEDULES, "recording a periodic job's tick")
        self._append_catalog(tick, at, actor)

    def _require(self, needed: int, what: str) -> None:
        """Refuse what a server of the cluster's ledger format could not read."""
        if self.cluster_format < needed:
            raise formats.FormatTooOldError(
                f"{what} needs ledger format {needed}; the cluster writes format "
                f"{self.cluster_format}: run `pinledger upgrade-format` once every server "
                "runs this release (docs/guides/upgrading.md)"
            )

    def delete_queue(self, name: str, at: int, actor: Actor) -> None:
        """Record the deletion first, so projections drop the queue's rows, then delete
        its topic (its history goes with it, as PinLater dropped its tables)."""
        self._append_catalog(QueueDeleted(name=name), at, actor)
        self.log.delete_topic(self.topic(name))

    def _placements(self, name: str, partitions: int, new: bool) -> list[PartitionPlaced]:
        """The placement records of the partitions a creation or resize adds, in the
        creation's or resize's record: no server sees the new partitions before it sees
        where they are. None below the format that has them (an older server could not
        read them): the partitions stay on the home shard."""
        if self.placer is None or self.cluster_format < formats.PLACEMENTS:
            return []
        why = "queue created" if new else "queue resized"
        shards = self.placer(name, partitions, new)
        return [PartitionPlaced(name, p, shard, why) for p, shard in sorted(shards.items())]

    def _append_catalog(
        self, event: Event, at: int, actor: Actor, more: Sequence[Event] = ()
    ) -> None:
        value = codec.encode(Envelope(at=at, actor=actor, events=(event, *more)))
        self.group.log_append([Append(catalog_topic(self.prefix), 0, value)])

    def append(
        self,
        queue: str,
        partition: int,
        events: Sequence[Event],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> int:
        """Append events as one record; returns its offset."""
        return self.append_many([(queue, partition, events)], at, actor, traceparent)[0]

    def append_many(
        self,
        batches: Sequence[Batch],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[int]:
        """Append the events of each (queue, partition, events); returns the offset of
        the record each landed in, in order. Concurrent callers to one partition share
        records (group_commit.py)."""
        return self.append_traced([(batches, traceparent)], at, actor)[0]

    def append_traced(self, sets: Sequence[Traced], at: int, actor: Actor) -> list[list[int]]:
        """Append several sets of batches, each with its own trace context, in one group
        commit: one round trip for all of them (a dequeue's piggybacked acks and its
        claims), the parts of one partition in one record, in the order given. Returns
        each set's offsets: of each batch, the record holding its first event (a batch
        too big for one record is cut into several)."""
        cut = self._commit([(batch, tp) for batches, tp in sets for batch in batches], at, actor)
        firsts = iter(parts[0].offset for parts in cut)
        return [[next(firsts) for _ in batches] for batches, _ in sets]

    def append_records(
        self,
        batches: Sequence[Batch],
        at: int,
        actor: Actor,
    ) -> list[int]:
        """One record of its own per (queue, partition, events), never shared: for
        what needs the offsets to move (import_guard's fillers)."""
        value_of = codec.encode
        appends = [
            Append(self.topic(queue), partition, value_of(Envelope(at, actor, tuple(events))))
            for queue, partition, events in batches
        ]
        offsets = self.group.log_append(appends)
        self._note([(a.topic, a.partition) for a in appends], offsets)
        return offsets

    def _commit(
        self, batches: Sequence[tuple[Batch, str | None]], at: int, actor: Actor
    ) -> list[list[Part]]:
        """Append each batch, cut into parts that fit a record; returns each batch's
        parts, in order."""
        cut = [
            self._parts(self.topic(queue), partition, Envelope(at, actor, tuple(events)), tp)
            for (queue, partition, events), tp in batches
        ]
        parts = [part for batch_parts in cut for part in batch_parts]
        self.group.append(parts)
        self._note([p.key for p in parts], [p.offset for p in parts])
        return cut

    def _parts(
        self, topic: str, partition: int, envelope: Envelope, traceparent: str | None
    ) -> list[Part]:
        """The envelope as one part when it fits (the common case: encoded once), else
        cut by its events' encoded sizes into parts that do."""
        target = self.group.part_bytes
        events = envelope.events
        # A big enqueue is cut without encoding it whole first: its bodies alone (4/3
        # in base64) say it cannot fit.
        bodies = sum(len(e.body) for e in events if isinstance(e, Enqueued))
        if len(events) <= JOBS_PER_RECORD and bodies // 3 * 4 <= target:
            part = _part(topic, partition, envelope, traceparent)
            if part.size <= target:
                return [part]
        return [
            _part(topic, partition, Envelope(envelope.at, envelope.actor, events), traceparent)
            for events in self._cut(envelope, traceparent, target)
        ]

    def _cut(
        self, envelope: Envelope, traceparent: str | None, target: int
    ) -> list[tuple[Event, ...]]:
        """The envelope's events in runs whose records stay within `target` bytes and
        JOBS_PER_RECORD events; an event alone over it goes alone when it fits the
        record limit, else nothing is appended (EventTooLargeError)."""
        # A part of events e1..en is the empty one with "e1,...,en" inside its "[]":
        # exact, since orjson writes no spaces (its group form is counted when a group
        # commit merges it).
        base = _part("", 0, Envelope(envelope.at, envelope.actor, ()), traceparent).size
        limit = self.group.record_limit
        runs: list[tuple[Event, ...]] = []
        start, size = 0, base
        events = envelope.events
        for i, nbytes in enumerate(codec.event_sizes(events)):
            alone = base + nbytes
            if alone > limit:
                raise EventTooLargeError(
                    f"event {i} ({codec.tag_of(events[i])}) makes a record of {alone} bytes, "
                    f"over the limit of {limit} (PINLEDGER_MAX_RECORD_BYTES, or the topic's "
                    "max.message.bytes)",
                    i,
                    alone,
                    limit,
                )
            if i > start and (i - start >= JOBS_PER_RECORD or size + nbytes + 1 > target):
                runs.append(events[start:i])
                start, size = i, base
            size += nbytes + (1 if i > start else 0)
        runs.append(events[start:])
        return runs

    def _note(self, keys: Sequence[tuple[str, int]], offsets: Sequence[int]) -> None:
        with self._lock:
            for key, offset in zip(keys, offsets, strict=True):
                if offset > self.appended.get(key, -1):
                    self.appended[key] = offset

    def enqueue(
        self,
        queue: str,
        partition: int,
        jobs: Sequence[Enqueued],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[JobDescriptor]:
        """Append enqueue records (cut by encoded size, at most JOBS_PER_RECORD jobs
        each) to one partition; returns one descriptor per job, in order. A job too big
        for a record of its own refuses the call (ENQUEUE_REJECTED) with nothing
        appended."""
        if not jobs:
            return []
        [descriptors] = self.enqueue_spread(queue, [(partition, jobs)], at, actor, traceparent)
        return descriptors

    def enqueue_spread(
        self,
        queue: str,
        groups: Sequence[tuple[int, Sequence[Enqueued]]],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[list[JobDescriptor]]:
        """`enqueue` of several partitions' jobs in one commit (unique jobs go to their
        keys' partitions, decision 0037); one list of descriptors per group, in order."""
        if self.cluster_format < formats.KEYS and any(
            job.unique_key is not None for _, jobs in groups for job in jobs
        ):
            self._require(formats.KEYS, "a unique job (uniqueKey)")
        try:
            cut = self._commit(
                [((queue, partition, jobs), traceparent) for partition, jobs in groups if jobs],
                at,
                actor,
            )
        except EventTooLargeError as exc:
            raise Refused(
                RefusalCode.ENQUEUE_REJECTED,
                f"job {exc.index}: its record would be {exc.size} bytes encoded (the body "
                f"in base64, the custom status, the envelope), over the limit of "
                f"{exc.limit} bytes a Kafka record may have here (PINLEDGER_MAX_RECORD_BYTES, "
                "or the topic's max.message.bytes): send a smaller body or status",
            ) from exc
        committed = iter(cut)
        found: list[list[JobDescriptor]] = []
        for partition, jobs in groups:
            parts = next(committed) if jobs else []
            priorities = iter(job.priority for job in jobs)
            found.append(
                [
                    JobDescriptor(
                        queue,
                        partition,
                        next(priorities),
                        local_id_for(part.offset, part.first + i),
                    )
                    for part in parts
                    for i in range(part.events)
                ]
            )
        return found


def _part(topic: str, partition: int, envelope: Envelope, traceparent: str | None) -> Part:
    value = codec.encode(envelope)
    return Part(
        topic,
        partition,
        value,
        codec.encode_part(envelope, traceparent, value),
        traceparent,
        len(envelope.events),
    )
