"""An in-memory store: implements projections.store.LedgerStore as the Postgres adapter
does (tests/contract/ runs one suite on both), thread-safe, and able to fail on demand.

`fail(reason)` makes every call raise StoreError, as an unreachable Postgres does,
until `recover()`; `close()` does the same for good, as a closed pool does.
`refuse_text_containing(fragment)` makes a commit whose text holds `fragment` fail
with a plain StoreError, as Postgres refuses a NUL in text and jsonb: a refusal that
fails again the same way. Several
fakes made with one `FakeDatabase` are schemas of one database, so a replay can diff
them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import (
    PartitionsRetired,
    Placement,
    QueuePaused,
    QueueResized,
    RecordSkipped,
)
from pinledger.ledger.state import FINISHED, Job, JobState
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.day_partitions import DayPartition
from pinledger.projections.fake.day_partitions import FakeDayPartitions
from pinledger.projections.fake.rows import (
    EventKey,
    ImportedRow,
    JobKey,
    check_event,
    check_job,
    compile_regex,
    diff_rows,
    escaped_body,
    listed,
    table_rows,
    text_problem,
)
from pinledger.projections.migration_plan import Plan, Progress, plan
from pinledger.projections.pg.sql import migrations
from pinledger.projections.row_text import event_line, job_line
from pinledger.projections.schedule_ticks import forget_queue, record
from pinledger.projections.skips import holds, stored_reason
from pinledger.projections.store import (
    ClaimHolder,
    DueJob,
    EventBucket,
    EventRow,
    HeldJob,
    JobCount,
    JobFilter,
    JobRow,
    JobSearch,
    OneShard,
    PartitionBatch,
    QueueRow,
    QueueTally,
    ScanKey,
    ScheduleTick,
    StateCount,
    StoreError,
    StoreUnavailableError,
    TableDiff,
    TimelineRow,
    catalog_fenced,
    check_forward,
    fenced,
    partition_gone,
    sorted_holders,
)

T = TypeVar("T")


class FakeDatabase:
    """The fakes sharing one: schema name -> store."""

    def __init__(self) -> None:
        self.schemas: dict[str, FakeStore] = {}


class FakeStore(OneShard):
    """A projection in memory (one schema of a FakeDatabase): one store shard."""

    # It behaves as Postgres where the two databases differ (body regexes, bytes).
    kind = "postgres"

    def __init__(self, schema: str = "public", database: FakeDatabase | None = None) -> None:
        self.schema = schema
        self.database = database or FakeDatabase()
        self.database.schemas[schema] = self
        self._lock = threading.RLock()
        self._failure: str | None = None
        self._migrated = False
        self._queues: dict[str, QueueRow] = {}
        self._jobs: dict[JobKey, tuple[Job, str | None]] = {}
        self._events: dict[EventKey, EventRow] = {}
        self._offsets: dict[tuple[str, int], int] = {}
        # (queue, PinLater descriptor) -> (partition, local id, priority)
        self._imported: dict[tuple[str, str], ImportedRow] = {}
        self._day_partitions = FakeDayPartitions()
        # Ended dashboard sessions: digest -> until when.
        self._ended_sessions: dict[str, int] = {}
        # Skipped records: (queue, partition) -> offset -> reason.
        self._skips: dict[tuple[str, int], dict[int, str]] = {}
        # Periodic jobs' latest ticks: (queue, schedule) -> tick.
        self._ticks: dict[tuple[str, str], ScheduleTick] = {}
        # Text a commit may not hold (`refuse_text_containing`).
        self._refused_text: str | None = None
        # Replaced whole by `hide`, read without the lock.
        self._away: Mapping[str, frozenset[int]] = MappingProxyType({})

    # -- failure injection --------------------------------------------------------------

    def fail(self, reason: str = "connection refused") -> None:
        with self._lock:
            self._failure = reason

    def recover(self) -> None:
        with self._lock:
            self._failure = None

    def refuse_text_containing(self, fragment: str | None) -> None:
        """Refuse, from now on, to commit a partition batch holding `fragment` in any text
        value (a job's custom status, claim, a timeline row's fields and detail), as
        Postgres refuses "\x00": a plain StoreError, not an unavailable store. None
        accepts everything again."""
        with self._lock:
            self._refused_text = fragment

    def _run(self, what: str, action: Callable[[], T]) -> T:
        with self._lock:
            if self._failure is not None:
                raise StoreUnavailableError(
                    f"Postgres is unreachable ({what}, fake): {self._failure}"
                )
            return action()

    # -- lifecycle ----------------------------------------------------------------------

    def migrate(self, *, allow_pause: bool = False, progress: Progress | None = None) -> list[str]:
        # The fake's schema is new until its first migrate, and a new schema runs every
        # migration, pauses included: `allow_pause` never matters here.
        def run() -> list[str]:
            pending = self.migration_plan().pending
            self._migrated = True
            for migration in pending:
                if progress is not None:
                    progress(migration, 0.0)
            return [migration.name for migration in pending]

        return self._run("migrating", run)

    def migration_plan(self) -> Plan:
        return plan(
            self.schema,
            migrations(),
            {m.version for m in migrations()} if self._migrated else set(),
        )

    def close(self) -> None:
        self.fail("the store is closed")

    def drop(self) -> None:
        with self._lock:
            self.close()
            self.database.schemas.pop(self.schema, None)
            self._queues.clear()
            self._jobs.clear()
            self._events.clear()
            self._offsets.clear()
            self._skips.clear()
            self._ticks.clear()
            self._day_partitions = FakeDayPartitions()

    # -- the projector's side ------------------------------------------------------------

    def offset(self, topic: str, partition: int) -> int:
        def run() -> int:
            found = self._offsets.get((topic, partition))
            if found is None:
                raise partition_gone(topic, partition)
            return found

        return self._run("reading an offset", run)

    def start_offset(self, topic: str, partition: int) -> int:
        return self._run(
            "starting an offset", lambda: self._offsets.setdefault((topic, partition), 0)
        )

    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        keys = list(partitions)
        return self._run(
            "reading offsets", lambda: {k: self._offsets[k] for k in keys if k in self._offsets}
        )

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        wanted = list(ids)

        def run() -> dict[int, Job]:
            found = (self._jobs.get((queue, partition, i)) for i in wanted)
            return {entry[0].local_id: entry[0] for entry in found if entry is not None}

        return self._run("loading jobs", run)

    def keyed_jobs(self, queue: str, partition: int, keys: Iterable[str]) -> list[Job]:
        wanted = set(keys)

        def run() -> list[Job]:
            return [
                job
                for (q, p, _), (job, _) in self._jobs.items()
                if q == queue and p == partition and job.unique_key in wanted
            ]

        return self._run("loading keyed jobs", run)

    def partition_jobs(
        self, queue: str, partition: int, states: Iterable[JobState] = tuple(JobState)
    ) -> dict[int, Job]:
        wanted = set(states)
        return self._run(
            "loading a partition's jobs",
            lambda: {
                k[2]: job
                for k, (job, _) in self._jobs.items()
                if k[:2] == (queue, partition) and job.state in wanted
            },
        )

    def partition_traceparents(
        self, queue: str, partition: int, states: Iterable[JobState]
    ) -> dict[int, str]:
        wanted = set(states)
        return self._run(
            "loading trace contexts",
            lambda: {
                k[2]: tp
                for k, (job, tp) in self._jobs.items()
                if k[:2] == (queue, partition) and job.state in wanted and tp is not None
            },
        )

    def ready_jobs(
        self, queue: str, partition: int, priority: int, after: tuple[int, int], limit: int
    ) -> list[HeldJob]:
        def run() -> list[HeldJob]:
            found = sorted(
                (
                    HeldJob(job, tp)
                    for k, (job, tp) in self._jobs.items()
                    if k[:2] == (queue, partition)
                    and job.state is JobState.PENDING
                    and job.priority == priority
                    and (job.run_after, job.local_id) > after
                ),
                key=lambda held: (held.job.run_after, held.job.local_id),
            )
            return found[:limit]

        return self._run("refilling a ready window", run)

    def expired_claims(
        self, queue: str, partition: int, touched_before: int, limit: int
    ) -> list[HeldJob]:
        def run() -> list[HeldJob]:
            found = sorted(
                (
                    (job.touched_at, job.local_id, tp, job)
                    for k, (job, tp) in self._jobs.items()
                    if k[:2] == (queue, partition)
                    and job.state is JobState.IN_PROGRESS
                    and job.touched_at is not None
                    and job.touched_at <= touched_before
                ),
                key=lambda found: found[:2],
            )
            return [HeldJob(job._replace(body=b""), tp) for *_, tp, job in found[:limit]]

        return self._run("finding expired claims", run)

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        self._run(f"committing {batch.topic}[{batch.partition}]", lambda: self._commit(batch))

    def skipped_records(self, queue: str, partition: int) -> dict[int, str]:
        return self._run(
            f"reading the skipped records of {queue}[{partition}]",
            lambda: dict(sorted(self._skips.get((queue, partition), {}).items())),
        )

    def remove_partition(self, queue: str, topic: str, partition: int, limit: int) -> int:
        def batch(table: dict[Any, Any], of_partition: Callable[[Any, Any], bool]) -> int:
            keys = sorted(k for k, v in table.items() if of_partition(k, v))[:limit]
            for key in keys:
                del table[key]
            return len(keys)

        def run() -> int:
            self._offsets.pop((topic, partition), None)
            return (
                batch(self._jobs, lambda k, _: k[:2] == (queue, partition))
                or batch(self._events, lambda k, _: k[:2] == (queue, partition))
                or batch(self._imported, lambda k, v: k[0] == queue and v[0] == partition)
            )

        return self._run(f"removing {topic}[{partition}]", run)

    def _commit(self, batch: PartitionBatch) -> None:
        check_forward(batch.topic, batch.partition, batch.expected_offset, batch.next_offset)
        key = (batch.topic, batch.partition)
        found = self._offsets.get(key)
        if found != batch.expected_offset:
            raise fenced(batch, found)
        # Every check before the first change: the batch applies whole or not at all.
        if self._refused_text is not None:
            _refuse_text(batch, self._refused_text)
        events: dict[EventKey, EventRow] = {}
        for row in batch.events:
            check_event(row, batch.queue)
            event_key = (batch.queue, batch.partition, row.local_id, row.offset, row.idx)
            if event_key in self._events or event_key in events:
                raise StoreError(f"the store refused event row {event_key}: it exists already")
            events[event_key] = row
        for job in batch.upserts:
            check_job(job, batch.queue)
        for imported in batch.imported.values():
            wrong = text_problem(imported.old_descriptor)
            if wrong is not None:
                raise StoreError(f"the store refused PinLater descriptor: it {wrong}")
        self._offsets[key] = batch.next_offset
        self._day_partitions.ensure_for(batch.events)
        self._events.update(events)
        for local_id in batch.removals:
            self._jobs.pop((batch.queue, batch.partition, local_id), None)
        for local_id, imported in batch.imported.items():
            # As the stores' insert: the first import of a PinLater descriptor stays.
            self._imported.setdefault(
                (batch.queue, imported.old_descriptor),
                (batch.partition, local_id, imported.priority),
            )
        for job in batch.upserts:
            job_key = (batch.queue, batch.partition, job.local_id)
            old = self._jobs.get(job_key)
            if old is None:
                self._jobs[job_key] = (job, batch.traceparents.get(job.local_id))
            else:  # as the upsert: the first created_at, trace context and key stay
                self._jobs[job_key] = (
                    job._replace(created_at=old[0].created_at, unique_key=old[0].unique_key),
                    old[1],
                )

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
        def run() -> None:
            check_forward(topic, 0, expected_offset, next_offset)
            if self._offsets.get((topic, 0)) != expected_offset:
                raise catalog_fenced(topic, expected_offset)
            self._offsets[(topic, 0)] = next_offset
            for name, queue_topic in deleted:
                self._forget_queue(name, queue_topic)
            for row, topics in created:
                # As the SQL store: a new queue under an old name starts empty.
                for queue_topic in topics:
                    self._forget_queue(row.name, queue_topic)
                self._queues[row.name] = row
                self._start_partitions(row, topics)
            for row, topics in resized:
                # As the UPDATE: an unknown queue stays unknown.
                fold_queue_event(self._queues, QueueResized(row.name, row.partitions), 0)
                self._start_partitions(row, topics)
            for retirement in retired:
                fold_queue_event(self._queues, retirement, 0)
            for placement in placed:
                fold_queue_event(self._queues, placement, 0)
            for skip in skipped:
                if holds(self._queues, skip):  # as the insert: a partition the queue has
                    offsets = self._skips.setdefault((skip.name, skip.partition), {})
                    offsets.setdefault(skip.offset, stored_reason(skip.reason))
            for pause in paused:
                fold_queue_event(self._queues, pause, 0)  # as the UPDATE: known queues
            for tick in ticks:
                self._record_tick(tick)

        self._run(f"committing catalog {topic}", run)

    def _forget_queue(self, name: str, queue_topic: str) -> None:
        self._offsets = {k: v for k, v in self._offsets.items() if k[0] != queue_topic}
        self._queues.pop(name, None)
        self._jobs = {k: v for k, v in self._jobs.items() if k[0] != name}
        self._events = {k: v for k, v in self._events.items() if k[0] != name}
        self._imported = {k: v for k, v in self._imported.items() if k[0] != name}
        self._skips = {k: v for k, v in self._skips.items() if k[0] != name}
        forget_queue(self._ticks, name)

    def _record_tick(self, tick: ScheduleTick) -> None:
        """As the upsert: of a queue held, and only raising the schedule's tick."""
        if tick.queue in self._queues:
            record(self._ticks, tick)

    def _start_partitions(self, row: QueueRow, topics: Sequence[str]) -> None:
        if row.name not in self._queues:
            return  # as init_queue_offset: none for a queue the store does not hold
        for queue_topic in topics:
            for partition in range(row.partitions):
                self._offsets.setdefault((queue_topic, partition), 0)

    # -- the timeline's day partitions -----------------------------------------------

    def day_partitions(self) -> list[DayPartition]:
        return self._run("listing the timeline's day partitions", self._day_partitions.listed)

    def ensure_day_partitions(self, from_ms: int, to_ms: int) -> int:
        return self._run(
            "creating history partitions",
            lambda: self._day_partitions.ensure_between(from_ms, to_ms),
        )

    def drop_day_partitions_before(self, cutoff: int) -> int:
        return self._run(
            "dropping history partitions",
            lambda: self._day_partitions.drop_before(cutoff, self._events),
        )

    def expired(
        self, queue: str, partition: int, succeeded_before: int, failed_before: int, limit: int
    ) -> list[Job]:
        cut = {JobState.SUCCEEDED: succeeded_before, JobState.FAILED: failed_before}

        def run() -> list[Job]:
            found = [
                job._replace(body=b"")
                for k, (job, _) in self._jobs.items()
                if k[:2] == (queue, partition)
                and job.state in FINISHED
                and job.updated_at <= cut[job.state]
            ]
            return found[:limit]

        return self._run("finding expired jobs", run)

    def queues(self) -> list[QueueRow]:
        return self._run(
            "listing queues", lambda: sorted(self._queues.values(), key=lambda q: q.name)
        )

    def schedule_ticks(self, queue: str | None = None) -> list[ScheduleTick]:
        return self._run(
            "listing schedules' ticks",
            lambda: [
                tick
                for key, tick in sorted(self._ticks.items())
                if queue is None or key[0] == queue
            ],
        )

    def holds_jobs_from(self, queue: str, first: int) -> bool:
        return self._run(
            "looking for jobs in closed partitions",
            lambda: any(
                k[0] == queue and k[1] >= first and self._shown(queue, k[1]) for k in self._jobs
            ),
        )

    # -- the readers' side ----------------------------------------------------------------

    def hide(self, away: Mapping[str, Sequence[int]]) -> None:
        """Partitions of each queue whose rows this store may hold but which are placed
        on another shard: queue-wide reads leave them out (decision 0031, moves)."""
        self._away = MappingProxyType({q: frozenset(ps) for q, ps in away.items() if ps})

    def _shown(self, queue: str, partition: int) -> bool:
        """Whether a queue-wide read sees the queue's rows of `partition` (`hide`)."""
        return partition not in self._away.get(queue, ())

    def check_regex(self, regex: str | None) -> None:
        if regex is not None:
            self._run(f"checking body regex {regex!r}", lambda: compile_regex(regex))

    def _matching(self, where: JobFilter) -> list[tuple[int, Job]]:
        """(partition, job) of the jobs a filter selects, its time split aside."""
        pattern = None if where.regex is None else compile_regex(where.regex)
        return [
            (k[1], job)
            for k, (job, _) in self._jobs.items()
            if k[0] == where.queue
            and self._shown(where.queue, k[1])
            and job.state is where.state
            and (where.priority is None or job.priority == where.priority)
            and (pattern is None or pattern.search(escaped_body(job.body)) is not None)
        ]

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        def run() -> list[JobRow]:
            found = ((p, self._jobs.get((queue, p, i))) for p, i in keys)
            return [
                JobRow(p, listed(entry[0], entry[0].body if include_body else b""))
                for p, entry in found
                if entry is not None
            ]

        return self._run("looking up jobs", run)

    def imported(self, queue: str, old_descriptors: Sequence[str]) -> dict[str, JobDescriptor]:
        def run() -> dict[str, JobDescriptor]:
            found = ((old, self._imported.get((queue, old))) for old in old_descriptors)
            return {
                old: JobDescriptor(queue, row[0], row[2], row[1])
                for old, row in found
                if row is not None and self._shown(queue, row[0])
            }

        return self._run("reading imported descriptors", run)

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        return self._run(
            "counting jobs",
            lambda: sum((job.run_after > now) == future for _, job in self._matching(where)),
        )

    def scan(
        self, where: JobFilter, now: int, future: bool, after: ScanKey | None, limit: int
    ) -> list[JobRow]:
        def run() -> list[JobRow]:
            found = [
                (job.run_after, partition, job.local_id, job)
                for partition, job in self._matching(where)
                if (job.run_after > now) == future
            ]
            if after is not None:
                bound = (after.run_after, after.partition, after.local_id)
                found = [f for f in found if f[:3] < bound]
            found.sort(key=lambda f: f[:3], reverse=True)
            return [JobRow(p, listed(job)) for _, p, _, job in found[:limit]]

        return self._run("scanning jobs", run)

    def select(self, where: JobFilter, limit: int) -> list[JobRow]:
        assert where.priority is not None

        def run() -> list[JobRow]:
            found = sorted(
                self._matching(where), key=lambda f: (f[1].run_after, f[0], f[1].local_id)
            )
            return [JobRow(p, job._replace(body=b"")) for p, job in found[:limit]]

        return self._run("selecting jobs", run)

    def timeline(self, queue: str, partition: int, local_id: int) -> list[TimelineRow]:
        def run() -> list[TimelineRow]:
            rows = sorted(
                (k[3:], row)
                for k, row in self._events.items()
                if k[:3] == (queue, partition, local_id)
            )
            return [TimelineRow(*row[1:]) for _, row in rows]

        return self._run("reading a job's timeline", run)

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        return [EventRow(local_id, *row) for row in self.timeline(queue, partition, local_id)]

    def job_counts(self) -> list[JobCount]:
        def run() -> list[JobCount]:
            counts = Counter(
                (k[0], job.state, job.priority)
                for k, (job, _) in self._jobs.items()
                if self._shown(k[0], k[1])
            )
            return [JobCount(q, s, p, n) for (q, s, p), n in sorted(counts.items())]

        return self._run("counting jobs", run)

    def counts_as_of(self, queue: str, now: int) -> list[StateCount]:
        def run() -> list[StateCount]:
            counts = Counter(
                (job.state, job.priority, job.run_after > now)
                for k, (job, _) in self._jobs.items()
                if k[0] == queue and self._shown(queue, k[1])
            )
            return [StateCount(s, p, f, n) for (s, p, f), n in sorted(counts.items())]

        return self._run("counting jobs as of a moment", run)

    def due_in_dequeue_order(self, queue: str, now: int, limit: int) -> list[DueJob]:
        def run() -> list[DueJob]:
            due = [
                (job.priority, job.run_after, job.local_id, k[1])
                for k, (job, _) in self._jobs.items()
                if k[0] == queue
                and self._shown(queue, k[1])
                and job.state is JobState.PENDING
                and job.run_after <= now
            ]
            return [DueJob(p, i, pr, r) for pr, r, i, p in sorted(due)[:limit]]

        return self._run("listing due jobs", run)

    def last_event_time(self, queue: str) -> int | None:
        return self._run(
            "reading the last event time",
            lambda: max(
                (
                    row.at
                    for k, row in self._events.items()
                    if k[0] == queue and self._shown(queue, k[1])
                ),
                default=None,
            ),
        )

    # -- the dashboard's reads -------------------------------------------------------------

    # -- ended dashboard sessions ------------------------------------------------------

    def end_session(self, session_id: str, until_ms: int, now: int) -> None:
        def end() -> None:
            for old in [k for k, until in self._ended_sessions.items() if until <= now]:
                del self._ended_sessions[old]
            self._ended_sessions.setdefault(session_id, until_ms)

        self._run("ending a dashboard session", end)

    def session_ended(self, session_id: str) -> bool:
        return self._run("checking a dashboard session", lambda: session_id in self._ended_sessions)

    def find_jobs(self, search: JobSearch, after: ScanKey | None, limit: int) -> list[JobRow]:
        def run() -> list[JobRow]:
            body = None if search.body_regex is None else compile_regex(search.body_regex)
            status = None if search.status_regex is None else compile_regex(search.status_regex)
            found = [
                (job.run_after, k[1], job.local_id, job)
                for k, (job, _) in self._jobs.items()
                if k[0] == search.queue
                and self._shown(search.queue, k[1])
                and job.state is search.state
                and (search.priority is None or job.priority == search.priority)
                and (body is None or body.search(escaped_body(job.body)) is not None)
                and (status is None or status.search(job.custom_status) is not None)
            ]
            if after is not None:
                bound = (after.run_after, after.partition, after.local_id)
                found = [f for f in found if f[:3] < bound]
            found.sort(key=lambda f: f[:3], reverse=True)
            return [JobRow(p, listed(job, job.body)) for _, p, _, job in found[:limit]]

        return self._run("finding jobs", run)

    def oldest_due(self, queue: str, now: int, priorities: int) -> int | None:
        return self._run(
            "finding the oldest due job",
            lambda: min(
                (
                    job.run_after
                    for k, (job, _) in self._jobs.items()
                    if k[0] == queue
                    and self._shown(queue, k[1])
                    and job.state is JobState.PENDING
                    and job.run_after <= now
                    and 1 <= job.priority <= priorities
                ),
                default=None,
            ),
        )

    def claim_holders(self, queue: str, limit: int) -> list[ClaimHolder]:
        def run() -> list[ClaimHolder]:
            held: dict[str, list[int]] = {}
            for k, (job, _) in self._jobs.items():
                if k[0] == queue and self._shown(queue, k[1]) and job.state is JobState.IN_PROGRESS:
                    jobs_last = held.setdefault(job.claim_source or "", [0, 0])
                    jobs_last[0] += 1
                    jobs_last[1] = max(jobs_last[1], job.touched_at or 0)
            return sorted_holders([ClaimHolder(s, n, last) for s, (n, last) in held.items()], limit)

        return self._run("listing the claim holders", run)

    def event_buckets(
        self, queue: str, types: Sequence[str], since: int, until: int, bucket_ms: int
    ) -> list[EventBucket]:
        def run() -> list[EventBucket]:
            counts = Counter(
                (since + (row.at - since) // bucket_ms * bucket_ms, row.type)
                for k, row in self._events.items()
                if k[0] == queue
                and self._shown(queue, k[1])
                and row.applied
                and row.type in types
                and since <= row.at < until
            )
            return [EventBucket(start, kind, n) for (start, kind), n in sorted(counts.items())]

        return self._run("counting events by time", run)

    def queue_tally(self, queue: str, now: int, priorities: int, cap: int) -> QueueTally:
        def run() -> QueueTally:
            counts = Counter(
                (job.state, job.state is JobState.PENDING and job.run_after > now)
                for k, (job, _) in self._jobs.items()
                if k[0] == queue
                and self._shown(queue, k[1])
                and (job.state is not JobState.PENDING or 1 <= job.priority <= priorities)
            )
            return QueueTally(
                *(
                    min(counts[key], cap)
                    for key in [
                        (JobState.PENDING, False),
                        (JobState.PENDING, True),
                        (JobState.IN_PROGRESS, False),
                        (JobState.SUCCEEDED, False),
                        (JobState.FAILED, False),
                    ]
                )
            )

        return self._run("counting a queue's jobs", run)

    # -- the verify's streams ---------------------------------------------------------------

    def stream_jobs(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[HeldJob]:
        def run() -> list[HeldJob]:
            return [
                HeldJob(job, tp)
                for k, (job, tp) in sorted(self._jobs.items(), key=lambda item: item[0][2])
                if k[:2] == (queue, partition)
                and (lo is None or k[2] >= lo)
                and (hi is None or k[2] < hi)
            ]

        # A snapshot taken at the first step, as a database's statement would.
        yield from self._run("streaming a partition's jobs", run)

    def stream_events(self, queue: str, partition: int, from_offset: int) -> Iterator[EventRow]:
        def run() -> list[EventRow]:
            found = [
                row
                for k, row in self._events.items()
                if k[:2] == (queue, partition) and row.offset >= from_offset
            ]
            return sorted(found, key=lambda row: (row.offset, row.idx, row.local_id, row.at))

        yield from self._run("streaming a partition's timeline", run)

    def job_lines(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[bytes]:
        for held in self.stream_jobs(queue, partition, lo, hi):
            yield job_line(held.job, held.traceparent)

    def event_lines(self, queue: str, partition: int, from_offset: int) -> Iterator[bytes]:
        for row in self.stream_events(queue, partition, from_offset):
            yield event_line(row)

    # -- the replay's diff ----------------------------------------------------------------

    def _table(self, table: str) -> list[dict[str, Any]]:
        return table_rows(
            table,
            self.schema,
            self._queues,
            self._jobs,
            self._events,
            self._imported,
            self._skips,
            self._ticks,
        )

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
        def run() -> TableDiff:
            other = self.database.schemas.get(other_schema)
            if other is None:
                raise StoreError(f"no schema {other_schema!r} in this fake database")
            return diff_rows(
                self._table(table),
                other._table(table),
                lambda row: (
                    row[queue_column] in queues
                    and (partition is None or row[partition_column] == partition)
                ),
                limit,
            )

        return self._run(f"comparing {table} with schema {other_schema}", run)


def _refuse_text(batch: PartitionBatch, fragment: str) -> None:
    """Raise as Postgres refuses a batch with `fragment` (a NUL) in a text value."""

    def holds_it(value: object) -> bool:
        if isinstance(value, str):
            return fragment in value
        if isinstance(value, dict):
            return any(holds_it(k) or holds_it(v) for k, v in value.items())
        if isinstance(value, list | tuple):
            return any(holds_it(v) for v in value)
        return False

    texts: list[object] = [list(batch.traceparents.values())]
    texts += [(job.custom_status, job.claim, job.claim_source) for job in batch.upserts]
    texts += [
        (row.source, row.request_id, row.server, row.claim, row.verdict, row.detail)
        for row in batch.events
    ]
    if holds_it(texts):
        raise StoreError(
            f"Postgres refused committing {batch.topic}[{batch.partition}] (fake): "
            f"DataError: a text value holds {fragment!r}, which the store refuses"
        )
