"""The event model: what the ledger records, one type per action.

A Kafka record holds one `Envelope`: the time, the actor and a list of events that
all concern one partition of one queue (or, for queue events, the catalog). Batching
events per record keeps the log cheap (one record per enqueue call or dequeue call
per partition) while the state machine still sees one event per job.

Every job event names its job by `local_id`, except `Enqueued`, whose local id is
derived from the record's offset and the event's index (`descriptor.local_id_for`):
the id does not exist until Kafka has placed the record.

Times are integer milliseconds since the Unix epoch, taken from the envelope: the
state machine never reads a clock, so replaying a partition always gives the same
state. Event encoding lives in `codec.py`; bump `codec.VERSION` when a field changes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asked: PinLater's RequestContext (`source` is "service:host"), and the
    pinledger server that appended the record."""

    source: str = ""
    request_id: str = ""
    server: str = ""


@dataclass(frozen=True, slots=True)
class Enqueued:
    """A new job. `imported_from` is the PinLater descriptor of a job that
    `pinledger import-pinlater` moved onto the ledger (None for every other job): the
    projection maps it to the new descriptor, so lookups and traces accept the old one
    (docs/decisions/0017-imported-descriptors.md)."""

    body: bytes
    priority: int
    run_after: int
    attempts_allowed: int
    custom_status: str = ""
    imported_from: str | None = None
    # A unique job's key (ledger format 3, decision 0037): the enqueue creates no job
    # while a job of the partition holds the key (unfinished, or finished less than
    # `unique_for_ms` before this record); the key routes the job to its partition.
    unique_key: str | None = None
    unique_for_ms: int = 0


@dataclass(frozen=True, slots=True)
class Claimed:
    """A dequeue call claimed the job; one claim descriptor per dequeue call."""

    local_id: int
    claim: str


@dataclass(frozen=True, slots=True)
class Succeeded:
    """A success ack. `claim` fences it to one attempt when the caller knows its claim;
    PinLater acks carry no claim, so without one the ack is fenced by the claim's
    source (see state.py)."""

    local_id: int
    append_status: str = ""
    claim: str | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """A failure ack: retry after `retry_delay_ms` while attempts remain."""

    local_id: int
    retry_delay_ms: int = 0
    append_status: str = ""
    claim: str | None = None


@dataclass(frozen=True, slots=True)
class Checkpointed:
    """A heartbeat, optionally replacing the body, resetting attempts, prepending to the
    custom status, or moving the job back to PENDING (chained and cron-like jobs)."""

    local_id: int
    new_body: bytes | None = None
    move_to_pending: bool = False
    run_after: int | None = None
    attempts_allowed: int | None = None
    prepend_status: str | None = None
    claim: str | None = None


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The owner found the claim expired. `claim` and `touched_at` are what the owner
    saw, so a heartbeat that landed in between wins over the timeout."""

    local_id: int
    claim: str
    touched_at: int


@dataclass(frozen=True, slots=True)
class Retried:
    """An operator's retryFailedJobs: FAILED back to PENDING."""

    local_id: int
    attempts_allowed: int
    run_after: int


@dataclass(frozen=True, slots=True)
class Deleted:
    """An operator's deleteJobs. `state` (a PinLaterJobState number; ledger format 3
    and later) is the state the job was selected in: the delete applies only while the
    job is still in it, so a deleteJobs(FAILED) that races a retry or a claim never
    deletes the job that is now PENDING or running. None (what format 1 and 2 records
    carry) deletes the job in any state."""

    local_id: int
    state: int | None = None


@dataclass(frozen=True, slots=True)
class Collected:
    """Garbage collection of a finished job past its TTL; its history stays in the log."""

    local_id: int


@dataclass(frozen=True, slots=True)
class QueueCreated:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class QueueDeleted:
    name: str


@dataclass(frozen=True, slots=True)
class QueueResized:
    """The queue takes new jobs on partitions 0..partitions-1 from this record on
    (ledger format 2 and later). Its topic has at least that many partitions already:
    Kafka's partitions are added first. `reason` says who or what asked (an operator's
    command, the queue config)."""

    name: str
    partitions: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PartitionsRetired:
    """The queue's partitions `first` and above hold no job and do no owner work (ledger
    format 2 and later): a resize closed them, their jobs were dequeued, finished and
    collected. A later resize to N reopens those below N. `first` equal to the queue's
    partition count retires none: the record that undoes a retirement when a job turned
    up in a retired partition after all. `reason` says why."""

    name: str
    first: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PartitionPlaced:
    """The queue's partition `partition` is projected into the store shard named `shard`
    (ledger format 2 and later, decision 0031). Appended with the creation or resize
    that adds the partition, in the same record. The first placement of a partition
    stands (two servers resizing at once place it once); `reason` says why."""

    name: str
    partition: int
    shard: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PartitionMoved:
    """The queue's partition `partition` moves from the store shard `source` ("": the
    home shard, where an unplaced partition lives) to `shard` (ledger format 2 and
    later, decision 0031): `pinledger move-partition` appends it once `shard` holds the
    partition's projection up to `offset` of its log. It applies only while the
    partition is on `source` (a compare-and-set: of two moves of one partition, the
    first wins). Its owner then projects into `shard` from where `shard` is, catching up
    from `offset`, and serves from it."""

    name: str
    partition: int
    source: str
    shard: str
    offset: int


@dataclass(frozen=True, slots=True)
class RecordSkipped:
    """The record at `offset` of the queue's partition `partition` is never applied
    (ledger format 3 and later): `pinledger skip-record` appends it for a record no store
    commits (Postgres refuses a NUL in text) or no release decodes, which would otherwise
    stall its partition for good. Every projection (the owners', a replay, a move, the
    verify) passes over the record as if it held no event; the first skip of an offset
    stands. `reason` says why, in the operator's words."""

    name: str
    partition: int
    offset: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class QueuePaused:
    """The queue's jobs are no longer handed out (`paused`), or are again (ledger format
    3 and later, decision 0035): `pinledger queue pause|resume` or the dashboard appends
    it. A paused queue still takes enqueues; dequeueJobs answers no job on every server
    once it has read the record. The last record of a queue stands; a queue created
    again under the name starts unpaused. `reason` says why, in the operator's words."""

    name: str
    paused: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ScheduleTicked:
    """A tick of a periodic job (`schedules` in the queue config; ledger format 3 and
    later, decision 0038): the catalog owner's schedules duty enqueued the job of the
    tick due at `tick_ms` (wall clock, ms) of the queue's schedule `schedule`, as `job`
    (its descriptor). `job` is "" when the record only marks where a schedule began:
    ticks at or before `tick_ms` are not run. A schedule's latest tick stands (a record
    with an earlier or equal tick changes nothing); a queue's deletion drops its
    schedules' ticks, and a queue created again under the name starts with none."""

    name: str
    schedule: str
    tick_ms: int
    job: str = ""


@dataclass(frozen=True, slots=True)
class FormatRaised:
    """The cluster's ledger format, raised by `pinledger upgrade-format` (or recorded when
    a catalog is created): from this record on, servers write records of this format
    (ledger/formats.py). Only ever in the catalog, always in a plain record of codec
    version 1, so that every release that knows formats can read which one holds."""

    format: int


@dataclass(frozen=True, slots=True)
class Cancelled:
    """An operator's cancelJobs (ledger format 3 and later): a PENDING or IN_PROGRESS
    job ends FAILED with no attempts left, its custom status prefixed with who cancelled
    it (the envelope's actor) and `reason`. A finished job is not cancelled (rejected).
    A running job's worker hears it at its next checkpoint (decision 0036)."""

    local_id: int
    reason: str = ""


JobEvent = (
    Enqueued
    | Claimed
    | Succeeded
    | Failed
    | Checkpointed
    | TimedOut
    | Retried
    | Deleted
    | Collected
    | Cancelled
)
QueueEvent = (
    QueueCreated
    | QueueDeleted
    | QueueResized
    | PartitionsRetired
    | PartitionPlaced
    | PartitionMoved
    | RecordSkipped
    | QueuePaused
    | ScheduleTicked
)
# Where a partition's projection is: its first placement, and its moves.
Placement = PartitionPlaced | PartitionMoved
# What the catalog topic holds.
CatalogEvent = QueueEvent | FormatRaised
Event = JobEvent | CatalogEvent


@dataclass(frozen=True, slots=True)
class Envelope:
    """One Kafka record: the events of one append, with when and by whom."""

    at: int
    actor: Actor
    events: tuple[Event, ...]
