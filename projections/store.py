"""The Store ports: what the projection's storage must do, and the rows it speaks in.

Two sides use the store, and each sees only its own protocol:

- `ProjectorStore`, the writer: the projector (projections/projector.py) and the
  partition owners. A batch of projected rows is committed in ONE transaction together
  with the partition's new offset, by compare-and-set: the commit names the offset the
  batch started from, and fails with `FencedError` when the stored offset is no longer
  that one (another projector got there first). That compare-and-set is the only fence
  a projection needs: the rows are a pure function of the log, so two projectors that
  start a batch at the same offset write the same rows, and the one that loses the
  race learns it and reloads (docs/decisions/0010-epoch-and-event-tags.md).
- `ReadStore`, the readers: the RPC handler (lookups, counts, scans, bulk selections,
  a job's history), `pinledger replay --as-of`, the operator's commands.

`DayPartitionStore` is the timeline's day partitions (projections/day_partitions.py):
created ahead of need, dropped whole by the retention. `StoreAdmin` is the lifecycle
(migrate, close, drop), the store's kind and the replay's diff of two schemas.
`StoreShards` is where each partition lives: the store shards (decision 0031), which
a caller asks the store about, never its type. `LedgerStore` is all of them: what the
SQL store (projections/sql/) implements on Postgres and MariaDB,
`projections/fake/store.py` in memory and projections/sharded_store.py over
several of them; `tests/contract/` runs one suite on all four.

Errors: no driver exception crosses a store. Everything that goes wrong in the
database comes out as `StoreError` (or a subclass), with a message saying what to
check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import PartitionsRetired, Placement, QueuePaused, RecordSkipped
from pinledger.ledger.state import Job, JobState
from pinledger.projections.day_partitions import DayPartition

if TYPE_CHECKING:  # migration_plan imports StoreError from here
    from pinledger.projections.migration_plan import Plan, Progress

# -- errors -----------------------------------------------------------------------------


class StoreError(RuntimeError):
    """The store could not do what was asked; the message says what to check."""


class StoreUnavailableError(StoreError):
    """The database could not be reached (no connection, a pool timeout, the server
    went away): the same call may work later. Any other StoreError is a refusal that
    would fail again the same way."""


class StoreRefusedError(StoreUnavailableError):
    """The database answered and refused this client: its certificate is not trusted,
    TLS is required (or not offered), the password is wrong. Unavailable as far as a
    caller can tell, but it fails the same way until a setting changes: the message
    names the database, the reason and the setting to check, in one line, never the
    password."""


class PlacementUnknownError(StoreUnavailableError):
    """The home shard does not place the partition yet (its queue's creation or resize
    is not projected there yet): the same call works once it is. Only a store of several
    shards raises it (`StoreShards`)."""


class InvalidRegexError(StoreError):
    """A body regex the store cannot compile; the message carries the reason."""


class FencedError(StoreError):
    """Another projector moved the partition's offset: this one must stop and reload."""


class PartitionGoneError(FencedError):
    """The partition's offset row is gone: its queue was deleted (the catalog
    projection removed the queue's rows). Its remaining records must not be projected,
    or they would bring back rows, and an offset, that a queue created again under the
    same name would inherit."""


# -- rows -------------------------------------------------------------------------------


class EventRow(NamedTuple):
    """One row of a job's timeline (job_events): one event that named the job. A named
    tuple, as Job is (ledger/state.py): one is built per projected event."""

    local_id: int
    offset: int
    idx: int
    # The codec's tag of the event type (ledger/codec.py EVENT_TAGS), e.g. "enq".
    type: str
    at: int
    source: str
    request_id: str
    server: str
    claim: str | None
    applied: bool
    verdict: str
    state_after: int | None
    attempts_remaining_after: int | None
    detail: dict[str, Any]
    traceparent: str | None


class TimelineRow(NamedTuple):
    """A timeline row without its job id, in column order (tests index it)."""

    offset: int
    idx: int
    type: str
    at: int
    source: str
    request_id: str
    server: str
    claim: str | None
    applied: bool
    verdict: str
    state_after: int | None
    attempts_remaining_after: int | None
    detail: dict[str, Any]
    traceparent: str | None


class ImportedJob(NamedTuple):
    """A job `pinledger import-pinlater` enqueued: its PinLater descriptor and its
    priority (with the queue, partition and local id, its new descriptor)."""

    old_descriptor: str
    priority: int


# A scan key's numbers must fit the columns they are compared with (bigint, integer).
_I64 = 2**63
_I32 = 2**31


@dataclass(slots=True)
class PartitionBatch:
    """What one projected batch of records changes in one partition, committed in one
    transaction together with the partition's new offset."""

    queue: str
    topic: str
    partition: int
    expected_offset: int
    next_offset: int
    upserts: list[Job] = field(default_factory=list)
    removals: list[int] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    traceparents: dict[int, str] = field(default_factory=dict)
    # Imported jobs enqueued by the batch, by local id.
    imported: dict[int, ImportedJob] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs of a queue a count, scan or bulk action looks at."""

    queue: str
    state: JobState
    priority: int | None = None
    regex: str | None = None


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as lookups and scans return it (with its partition; body only on demand)."""

    partition: int
    job: Job


@dataclass(frozen=True, slots=True)
class ScanKey:
    """Where a scan page ended: the next page starts strictly after it. Its text form,
    `<run_after>.<partition>.<local_id>`, is scanJobs' continuation and the dashboard's
    page token alike, written and read only here."""

    run_after: int
    partition: int
    local_id: int

    def token(self) -> str:
        return f"{self.run_after}.{self.partition}.{self.local_id}"

    @classmethod
    def from_token(cls, token: str) -> ScanKey:
        """The key `token()` wrote; ValueError for any other text, and for numbers beyond
        the columns they are compared with (bigint, integer)."""
        parts = token.split(".")
        if len(parts) != 3:
            raise ValueError(f"{token!r} is not <run_after>.<partition>.<local_id>")
        run_after, partition, local_id = (int(p) for p in parts)
        if not (0 <= partition < _I32 and 0 <= local_id < _I64 and -_I64 <= run_after < _I64):
            raise ValueError(f"{token!r} is beyond the columns' ranges")
        return cls(run_after, partition, local_id)


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    # Every partition the queue has (its topic's): owned, dequeued, counted.
    partitions: int
    created_at: int
    # How many of them take new jobs (0 .. open_partitions - 1) since the queue was
    # resized to fewer; None: all (decision 0030).
    open_partitions: int | None = None
    # Partitions retired_from and above (never an open one) are retired: drained after a
    # resize closed them, empty, no owner work; None: none (decision 0030).
    retired_from: int | None = None
    # The shard (of the shard map, decision 0031) each partition's projection is placed
    # on, by partition; "" or past the end: not placed, so on the home shard (the map's
    # first, the one store without a map).
    shards: tuple[str, ...] = ()
    # Paused from the catalog (`QueuePaused`, decision 0035): dequeues hand out none of
    # its jobs; enqueues go on.
    paused: bool = False

    def shard_of(self, partition: int) -> str | None:
        """The shard partition `partition` is placed on; None: not placed (home)."""
        if partition < len(self.shards) and self.shards[partition]:
            return self.shards[partition]
        return None

    @property
    def open(self) -> int:
        """The partitions that take new jobs."""
        if self.open_partitions is None:
            return self.partitions
        return min(self.open_partitions, self.partitions)

    @property
    def active(self) -> int:
        """The partitions not retired (0 .. active - 1): the open ones and the draining
        ones, what owners work on and counts wait for."""
        if self.retired_from is None:
            return self.partitions
        return min(max(self.retired_from, self.open), self.partitions)

    def state_of(self, partition: int) -> str:
        """ "serving" (takes new jobs), "draining" (closed by a resize, may hold jobs) or
        "retired" (drained and empty)."""
        if partition < self.open:
            return "serving"
        return "draining" if partition < self.active else "retired"


def with_placements(
    rows: Iterable[QueueRow], placements: Iterable[tuple[str, int, str]]
) -> list[QueueRow]:
    """The queue rows with their partitions' shards, from (queue, partition, shard)
    placement rows (what a store keeps in a table of its own)."""
    by_queue: dict[str, dict[int, str]] = {}
    for queue, partition, shard in placements:
        by_queue.setdefault(queue, {})[int(partition)] = shard
    found = []
    for row in rows:
        placed = by_queue.get(row.name)
        if placed:
            shards = tuple(placed.get(p, "") for p in range(max(placed) + 1))
            found.append(dataclasses.replace(row, shards=shards))
        else:
            found.append(row)
    return found


class ScheduleTick(NamedTuple):
    """A schedule's latest tick, as the catalog's `ScheduleTicked` records say: when the
    tick was due (`tick_ms`), the job it enqueued ("" for where the schedule began) and
    when it was recorded (`at`, the record's time)."""

    queue: str
    schedule: str
    tick_ms: int
    job: str
    at: int


class JobCount(NamedTuple):
    """Jobs of a queue in one state and priority (replay's summary)."""

    queue: str
    state: JobState
    priority: int
    jobs: int


class StateCount(NamedTuple):
    """Jobs of one queue in one state and priority, due (future False) or not yet."""

    state: JobState
    priority: int
    future: bool
    jobs: int


class HeldJob(NamedTuple):
    """A job an owner reads to hold in memory, with its enqueue's trace context."""

    job: Job
    traceparent: str | None


# Before every (run_after, local_id) a job can have: where a ready window starts.
READY_START = (-(2**63), -(2**63))


class DueJob(NamedTuple):
    """A PENDING job that is due, as a dequeue orders it."""

    partition: int
    local_id: int
    priority: int
    run_after: int


@dataclass(frozen=True, slots=True)
class JobSearch:
    """The dashboard's job finder: one queue and state, optionally one priority, a body
    regex and a custom-status regex (both Postgres regular expressions)."""

    queue: str
    state: JobState
    priority: int | None = None
    body_regex: str | None = None
    status_regex: str | None = None


class ClaimHolder(NamedTuple):
    """One claim source (the RequestContext source of the worker that dequeued) holding
    IN_PROGRESS jobs of a queue: how many, and its last heartbeat (the latest claim
    taken or renewed, ms)."""

    source: str
    jobs: int
    last_heartbeat: int


def sorted_holders(holders: Iterable[ClaimHolder], limit: int) -> list[ClaimHolder]:
    """Claim holders as `claim_holders` answers them: the most jobs first, then by
    source, at most `limit`."""
    return sorted(holders, key=lambda h: (-h.jobs, h.source))[:limit]


class EventBucket(NamedTuple):
    """Applied events of one type projected for a queue in one time bucket (the dashboard's
    rates): `start` is the bucket's first millisecond."""

    start: int
    type: str
    events: int


class QueueTally(NamedTuple):
    """One queue's jobs at a glance (the dashboard's overview), each count stopping at
    the `cap` it was read with: a count equal to the cap means "at least that many"."""

    pending_due: int
    pending_future: int
    running: int
    succeeded: int
    failed: int


class TableDiff(NamedTuple):
    """Rows of a table only in one schema, only in the other: counts, then samples."""

    only_here: int
    only_there: int
    here_rows: list[Any]
    there_rows: list[Any]


def check_forward(topic: str, partition: int, expected_offset: int, next_offset: int) -> None:
    """An offset only moves forward: a commit that would not is a bug of its caller."""
    if next_offset <= expected_offset:
        raise StoreError(
            f"{topic}[{partition}]: a commit must move the offset forward, not from "
            f"{expected_offset} to {next_offset}"
        )


def fenced(batch: PartitionBatch, found: int | None) -> FencedError:
    """Why a batch's offset compare-and-set failed, given the offset found (None: the
    offset row is gone)."""
    if found is None:
        return PartitionGoneError(
            f"{batch.topic}[{batch.partition}]: queue {batch.queue!r} was deleted, or the "
            "partition moved to another store shard; its records are not projected here"
        )
    return FencedError(
        f"{batch.topic}[{batch.partition}] is no longer at offset "
        f"{batch.expected_offset}: another projector advanced it to {found}"
    )


def partition_gone(topic: str, partition: int) -> PartitionGoneError:
    """A partition this store holds no offset for."""
    return PartitionGoneError(
        f"{topic}[{partition}] has no offset in this store: its queue is not in the catalog "
        "here (deleted, or its creation not projected yet), or the partition moved to "
        "another store shard"
    )


def catalog_fenced(topic: str, expected_offset: int) -> FencedError:
    return FencedError(f"catalog {topic} is no longer at offset {expected_offset}")


# -- ports ------------------------------------------------------------------------------

UNFINISHED = (JobState.PENDING, JobState.IN_PROGRESS)


class ProjectorStore(Protocol):
    """What projectors and partition owners need."""

    def offset(self, topic: str, partition: int) -> int:
        """Next offset to project for a partition. Raises PartitionGoneError when the
        store holds none: its queue is not in the catalog projection (deleted, or its
        creation not projected yet) or the partition moved to another store shard. Never
        records one: a queue's partitions get theirs only from the catalog's projection
        (its creation or growth), so an owner that adopts a deleted queue's partition
        again can never project its records back (decision 0032)."""
        ...

    def start_offset(self, topic: str, partition: int) -> int:
        """Next offset to project, recorded at 0 when the store holds none: the catalog
        topic's own, and a partition move's target shard (service/shards/moves.py)."""
        ...

    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Next offset of each partition that has been seen (others are left out)."""
        ...

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        """The jobs of a partition by local id (with bodies); missing ones left out."""
        ...

    def keyed_jobs(self, queue: str, partition: int, keys: Iterable[str]) -> list[Job]:
        """The jobs of a partition holding any of `keys` (unique jobs, decision 0037),
        with their keys and bodies, in any state: what a keyed enqueue is decided
        against."""
        ...

    def partition_jobs(
        self, queue: str, partition: int, states: Iterable[JobState] = tuple(JobState)
    ) -> dict[int, Job]:
        """Every job of a partition in the given states (an owner adopting it loads the
        unfinished ones: `UNFINISHED`)."""
        ...

    def partition_traceparents(
        self, queue: str, partition: int, states: Iterable[JobState]
    ) -> dict[int, str]:
        """The enqueue trace context of the partition's jobs in the given states."""
        ...

    def ready_jobs(
        self, queue: str, partition: int, priority: int, after: tuple[int, int], limit: int
    ) -> list[HeldJob]:
        """PENDING jobs of one priority of a partition, in dequeue order (run_after, then
        local_id), strictly after `after` (READY_START: from the first), with bodies: what
        an owner's ready window refills from (docs/decisions/0014-ready-window.md)."""
        ...

    def expired_claims(
        self, queue: str, partition: int, touched_before: int, limit: int
    ) -> list[HeldJob]:
        """IN_PROGRESS jobs of a partition whose claim was taken or renewed at or before
        `touched_before`, oldest first, without bodies: the claims an owner times out."""
        ...

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        """Apply the batch and move the offset from `expected_offset` to `next_offset`,
        all or nothing. Raises PartitionGoneError when the partition's offset is gone
        (its queue was deleted), FencedError when it is not at `expected_offset`."""
        ...

    def commit_catalog(
        self,
        topic: str,
        expected_offset: int,
        next_offset: int,
        created: Sequence[tuple[QueueRow, Sequence[str]]],
        deleted: Sequence[tuple[str, str]],
        resized: Sequence[tuple[QueueRow, Sequence[str]]] = (),
        retired: Sequence[PartitionsRetired] = (),
        placed: Sequence[Placement] = (),
        skipped: Sequence[RecordSkipped] = (),
        paused: Sequence[QueuePaused] = (),
        ticks: Sequence[ScheduleTick] = (),
    ) -> None:
        """Apply queue creations (row, partition topics to start at offset 0),
        deletions (queue name, its topic: its jobs, timeline, offsets, placements,
        skipped records and schedules' ticks go too) and resizes (row with the new
        partition count, after deletions and creations: a queue only grows here, its new
        partitions start at offset 0), then retirements (of partitions still closed), placements (of
        partitions the queue has and that were not placed yet: `QueueRow.shards`; a
        move, of a partition still on the shard it names) and skipped records (of
        partitions the queue has; the first skip of an offset stands; the reason as
        projections/skips.py `stored_reason` keeps it) with the catalog offset, by the
        same compare-and-set; last, pauses and resumes (of queues it holds, in order:
        the last stands) and periodic jobs' ticks (`ScheduleTicked` with its record's
        time, decision 0038: of queues it holds, in order; a schedule's tick only ever
        rises, an earlier or equal one changes nothing)."""
        ...

    def skipped_records(self, queue: str, partition: int) -> dict[int, str]:
        """The partition's records an operator skipped (`RecordSkipped` projected from
        the catalog, decision 0032): offset -> reason. A projector passes over them."""
        ...

    def remove_partition(self, queue: str, topic: str, partition: int, limit: int) -> int:
        """Delete a batch of the partition's rows here, after it moved to another store
        shard (decision 0031): its offset row first (a projector still writing here is
        then fenced, PartitionGoneError), then at most about `limit` rows of one table
        (jobs, then timeline events, then imported descriptors). Returns the rows
        deleted; 0 once none are left."""
        ...

    def expired(
        self, queue: str, partition: int, succeeded_before: int, failed_before: int, limit: int
    ) -> list[Job]:
        """Finished jobs of a partition last updated at or before the cut-offs (no
        bodies): what garbage collection removes."""
        ...

    def queues(self) -> list[QueueRow]:
        """Every queue, by name."""
        ...

    def holds_jobs_from(self, queue: str, first: int) -> bool:
        """Whether the queue has any job in partition `first` or above."""
        ...


class ReadStore(Protocol):
    """What the RPCs, replay --as-of and the operator's commands read."""

    def queues(self) -> list[QueueRow]: ...

    def schedule_ticks(self, queue: str | None = None) -> list[ScheduleTick]:
        """The latest tick of each periodic job's schedule (`ScheduleTicked`, decision
        0038), of one queue or of all, by queue and schedule name."""
        ...

    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]: ...

    def check_regex(self, regex: str | None) -> None:
        """Raises InvalidRegexError for a body regex the store cannot use."""
        ...

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        """Jobs of one queue by (partition, local_id), in no particular order; missing
        ones are left out. Bodies only when asked (else b""); no claim source or touch
        time."""
        ...

    def imported(self, queue: str, old_descriptors: Sequence[str]) -> dict[str, JobDescriptor]:
        """The new descriptors of imported jobs of one queue, by the PinLater
        descriptors asked for (exact text); descriptors never imported are left out."""
        ...

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        """Jobs matching `where`, due at `now` (run_after <= now) or, with `future`,
        not yet due."""
        ...

    def scan(
        self, where: JobFilter, now: int, future: bool, after: ScanKey | None, limit: int
    ) -> list[JobRow]:
        """Jobs matching `where`, newest run_after first, then partition and local id
        descending, strictly after `after`; no bodies, claim source or touch time."""
        ...

    def select(self, where: JobFilter, limit: int) -> list[JobRow]:
        """Jobs for a bulk action (one priority), oldest run_after first, no bodies."""
        ...

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        """The job's timeline, in log order."""
        ...

    def timeline(self, queue: str, partition: int, local_id: int) -> list[TimelineRow]:
        """The job's timeline, in log order, as rows without the job id."""
        ...

    def job_counts(self) -> list[JobCount]:
        """Jobs by queue, state and priority, in that order."""
        ...

    def counts_as_of(self, queue: str, now: int) -> list[StateCount]:
        """One queue's jobs by state, priority and whether they are due at `now`."""
        ...

    def due_in_dequeue_order(self, queue: str, now: int, limit: int) -> list[DueJob]:
        """PENDING jobs due at `now`, in the order a dequeue takes them."""
        ...

    def last_event_time(self, queue: str) -> int | None:
        """The time of the newest event projected for a queue (None: none)."""
        ...

    # -- the verify's streams (projections/verify.py): both sides of a comparison ---------

    def stream_jobs(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[HeldJob]:
        """Every job of a partition with `lo` <= local_id < `hi` (None: no limit), by
        local id, with bodies and enqueue trace contexts. Streamed: the caller's memory
        does not grow with the partition (close the iterator when stopping early)."""
        ...

    def stream_events(self, queue: str, partition: int, from_offset: int) -> Iterator[EventRow]:
        """The partition's timeline rows of the records at or after `from_offset`, in log
        order (offset, idx, then local id and time). Streamed, like `stream_jobs`."""
        ...

    def job_lines(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[bytes]:
        """The rows of `stream_jobs`, each as its line of text (projections/row_text.py
        `job_line`: what Postgres's COPY prints), in the same order, streamed."""
        ...

    def event_lines(self, queue: str, partition: int, from_offset: int) -> Iterator[bytes]:
        """The rows of `stream_events`, each as its line of text (`event_line`), in the
        same order, streamed."""
        ...

    # -- the dashboard's reads (service/dashboard): each bounded, each on an index -------

    def find_jobs(self, search: JobSearch, after: ScanKey | None, limit: int) -> list[JobRow]:
        """Jobs matching `search`, due or not, newest run_after first (then partition and
        local id descending), strictly after `after`, at most `limit`; with bodies, no
        claim source or touch time."""
        ...

    def oldest_due(self, queue: str, now: int, priorities: int) -> int | None:
        """The smallest run_after among the queue's PENDING jobs due at `now` (priorities
        1..`priorities`), or None when none is due."""
        ...

    def claim_holders(self, queue: str, limit: int) -> list[ClaimHolder]:
        """The queue's claim sources with the IN_PROGRESS jobs each holds and its last
        heartbeat, the most jobs first (then by source), at most `limit` (the dashboard's
        workers view)."""
        ...

    def event_buckets(
        self, queue: str, types: Sequence[str], since: int, until: int, bucket_ms: int
    ) -> list[EventBucket]:
        """How many applied events of each of `types` (codec tags) the timeline holds for
        the queue in [since, until), per bucket of `bucket_ms` (aligned on `since`), by
        bucket then type; empty buckets left out."""
        ...

    def queue_tally(self, queue: str, now: int, priorities: int, cap: int) -> QueueTally:
        """The queue's PENDING jobs due at `now` and not yet due (priorities
        1..`priorities`), and its IN_PROGRESS, SUCCEEDED and FAILED jobs, each count
        stopping at `cap`: a few index ranges (one per state, PENDING's one per priority)
        of at most `cap` entries each, however many jobs the queue holds."""
        ...


class SessionStore(Protocol):
    """Dashboard sessions ended by a logout before their cookies expire, for every
    server of the cluster to refuse (dashboard/auth.py)."""

    def end_session(self, session_id: str, until_ms: int, now: int) -> None:
        """Refuse the session `session_id` (a digest of its cookie) until `until_ms`;
        forgets the sessions ended until `now`."""
        ...

    def session_ended(self, session_id: str) -> bool: ...


class DayPartitionStore(Protocol):
    """The timeline's day partitions. `commit_partition_batch` creates the partitions
    its events need itself, so an event at any time is written whatever was created
    ahead; these are for the history maintenance (and tests)."""

    def day_partitions(self) -> list[DayPartition]:
        """The partitions of the timeline, oldest first."""
        ...

    def ensure_day_partitions(self, from_ms: int, to_ms: int) -> int:
        """Make sure a partition holds every event time in [from_ms, to_ms); the
        number of partitions created."""
        ...

    def drop_day_partitions_before(self, cutoff: int) -> int:
        """Drop the partitions whose whole range is older than `cutoff` (ms), with
        every timeline row in them (whole partitions, never row by row); the number
        dropped. The jobs' current rows are not touched."""
        ...


class StoreAdmin(Protocol):
    """A store's lifecycle, the replay's comparison of two schemas and the partitions a
    shard's queue-wide reads leave out."""

    @property
    def kind(self) -> str:
        """Which database the store behaves as: "postgres" or "mysql" (whose regular
        expressions body regexes use, how bytes print; the FakeStore says "postgres")."""
        ...

    @property
    def schema(self) -> str: ...

    def migrate(self, *, allow_pause: bool = False, progress: Progress | None = None) -> list[str]:
        """Apply the migrations the schema lacks; returns the names applied. A migration
        that would block the servers' writes raises PauseNeededError unless
        `allow_pause` or the schema is new (docs/decisions/0024-online-migrations.md);
        `progress` is told of each one applied."""
        ...

    def migration_plan(self) -> Plan:
        """What `migrate` would do now, and whether it needs a pause; changes nothing."""
        ...

    def hide(self, away: Mapping[str, Sequence[int]]) -> None:
        """Partitions of each queue whose rows this store may hold but which are placed
        on another shard: queue-wide reads leave them out (decision 0031, moves).
        Replaced whole on each call; until the first, nothing is hidden. Reads naming
        their partitions (lookups, an owner's reads, the verify's streams) see them."""
        ...

    def close(self) -> None: ...

    def drop(self) -> None:
        """Remove the schema and everything in it."""
        ...

    def diff(
        self,
        *,
        other_schema: str,
        table: str,
        queue_column: str,
        partition_column: str,
        queues: Sequence[str],
        partition: int | None,
        limit: int,
    ) -> TableDiff:
        """Rows of `table` only here and only in `other_schema`, among the rows of
        `queues` (and, when given, of one partition)."""
        ...


class StoreShards(Protocol):
    """Where each partition's projection lives (decision 0031), asked of the store and
    not of its type, as River asks its driver (`SupportsListener()`): a store of
    several shards (projections/sharded_store.py) routes each partition to the shard
    it is placed on; a store that is one database answers for itself (`OneShard`):
    one shard, every partition on it, no moves."""

    def shards(self) -> Mapping[str, LedgerStore]:
        """Every store shard's own store, by name, home first: the catalog is projected
        into each, `/ready` probes each, a move reads and cleans each. A one-database
        store: itself, named "" (`ONE_STORE`)."""
        ...

    def supports_moves(self) -> bool:
        """Whether a partition's placement can change (`pinledger move-partition`):
        only then does an owner look for moves, and only then may a move be made."""
        ...

    def shard_name(self, queue: str, partition: int) -> str:
        """The shard the partition is placed on, as last read (placements are cached);
        PlacementUnknownError when it is not placed yet."""
        ...

    def placed_store(self, queue: str, partition: int) -> tuple[str, LedgerStore]:
        """The shard an owner adopting the partition projects into and serves from (its
        name, its store), kept until the partition moves; PlacementUnknownError while
        that shard cannot be trusted with it yet."""
        ...

    def forget_placements(self) -> None:
        """Read the placements again on the next call (a partition was found gone from
        the shard it was on: it may have moved)."""
        ...

    def open_listed(self, names: Iterable[str]) -> list[str]:
        """Open the shards of `names` not open yet (the shard map changed); the names of
        those opened. One that cannot be opened now is logged and opened when a
        partition needs it."""
        ...


# The shard name of a store that is one database: what the placement of a partition
# never placed says (`QueueRow.shards`), the home shard's.
ONE_STORE = ""


class OneShard:
    """The placement of a store that is one database (the SQL store, the FakeStore):
    one shard, named `ONE_STORE`, holding every partition; nothing to forget or to open;
    moves refused (`supports_moves`)."""

    def shards(self) -> Mapping[str, LedgerStore]:
        return MappingProxyType({ONE_STORE: cast("LedgerStore", self)})

    def supports_moves(self) -> bool:
        return False

    def shard_name(self, queue: str, partition: int) -> str:
        return ONE_STORE

    def placed_store(self, queue: str, partition: int) -> tuple[str, LedgerStore]:
        return ONE_STORE, cast("LedgerStore", self)

    def forget_placements(self) -> None:
        """Nothing cached: a partition never moves."""

    def open_listed(self, names: Iterable[str]) -> list[str]:
        return []


class LedgerStore(
    ProjectorStore, ReadStore, SessionStore, DayPartitionStore, StoreAdmin, StoreShards, Protocol
):
    """Everything: what an adapter implements."""
