"""Verify: fold the log and compare it with the live tables as streams, writing nothing
(`pinledger replay`'s default; `--into-schema` rebuilds a scratch schema instead,
projections/replay.py).

Like the scratch replay, each partition is read up to the offset the live projection
had committed (both sides then cover the same records and must be identical), folded
through the same `evolve` and `timeline_row` as the projector, and compared row for
row with the live `jobs` and `job_events`, both sides ordered by key and merged
(projections/verify_fold.py): memory is bounded by `max_jobs`, not by the backlog. The
decoding is CPU-bound Python, so partitions can be verified in several processes
(`workers`), each with its own log reader and store connection.
"""

from __future__ import annotations

import atexit
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace

from pinledger.ledger import codec
from pinledger.ledger.log import Log, catalog_topic, queue_topic
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.partition_log import read_partition
from pinledger.projections.prefetch import Prefetched
from pinledger.projections.projector import Scope
from pinledger.projections.replay import ReplayReport
from pinledger.projections.schedule_ticks import fold_tick
from pinledger.projections.skips import catalog_skips
from pinledger.projections.store import LedgerStore, QueueRow, ReadStore, ScheduleTick
from pinledger.projections.verify_fold import (
    IdRange,
    Keys,
    Overflow,
    PartitionFold,
    TableDiff,
    compare_sorted,
    event_key,
    event_sample,
    job_key,
    job_sample,
    owned_lines,
)

# Jobs a partition's fold holds at once before it is folded in ranges of local ids
# (one more pass over the log per range); a job costs ~0.5 KB plus its body.
MAX_JOBS = 500_000
# A live projection that moved while one of its partitions was compared is compared
# again from the new offset, at most this many times.
ATTEMPTS = 3

# (store, log) of a worker process: opened once per process by `_open_worker`.
Ports = tuple[LedgerStore, Log]
_worker: dict[str, Ports] = {}


@dataclass(frozen=True, slots=True)
class PartitionTask:
    queue: str
    topic: str
    partition: int
    # The live projection's next offset: the records compared end before it.
    end: int
    # The offsets of the records an operator skipped (decision 0032): passed over.
    skipped: frozenset[int] = frozenset()


@dataclass(slots=True)
class PartitionResult:
    events: int
    jobs: TableDiff = field(default_factory=lambda: TableDiff("jobs"))
    job_events: TableDiff = field(default_factory=lambda: TableDiff("job_events"))
    passes: int = 0


def _closing(*streams: object) -> ExitStack:
    """Closes the streams (generators holding a reader or a connection) on the way out,
    also when a comparison stops early."""
    stack = ExitStack()
    for stream in streams:
        close = getattr(stream, "close", None)
        if close is not None:
            stack.callback(close)
    return stack


def verify_partition(
    store: ReadStore, log: Log, task: PartitionTask, max_jobs: int = MAX_JOBS, samples: int = 5
) -> PartitionResult:
    """Fold one partition's records before `task.end` and compare them with its live
    rows; a partition holding more than `max_jobs` at once is folded range by range."""
    result = PartitionResult(events=0)
    id_range = IdRange()
    keyed = Keys()  # the partition's keyed jobs where the pass starts (decision 0037)
    while True:
        result.passes += 1
        fold = PartitionFold(id_range, max_jobs, task.skipped, keyed)
        events_diff = TableDiff("job_events")
        # Both sides of both tables are read ahead, each in a thread: the log's fetches and
        # Postgres's sorts overlap the fold.
        what = f"{task.topic}[{task.partition}]"
        records = Prefetched(
            read_partition(log, task.topic, task.partition, id_range.start, task.end), what
        )
        live_events = Prefetched(
            store.event_lines(task.queue, task.partition, id_range.start), f"{what} timeline"
        )
        live_jobs = Prefetched(
            store.job_lines(task.queue, task.partition, id_range.lo, id_range.hi), f"{what} jobs"
        )
        jobs_diff = TableDiff("jobs")
        try:
            with _closing(records, live_events, live_jobs):
                owned = live_events if id_range == IdRange() else owned_lines(live_events, id_range)
                compare_sorted(
                    fold.events(records), owned, event_key, events_diff, event_sample, samples
                )
                compare_sorted(fold.job_lines(), live_jobs, job_key, jobs_diff, job_sample, samples)
        except Overflow as overflow:
            id_range = IdRange(id_range.lo, overflow.hi)  # the same pass, on fewer jobs
            continue
        result.events += fold.rows
        result.job_events.add(events_diff, samples)
        result.jobs.add(jobs_diff, samples)
        if id_range.hi is None:
            return result
        keyed = fold.keyed_at_hi or keyed
        id_range = IdRange(id_range.hi, None)


def verify_settled(
    store: ReadStore, log: Log, task: PartitionTask, max_jobs: int, samples: int
) -> PartitionResult:
    """`verify_partition`, compared again from the new offset when the live projection
    committed more of the partition meanwhile (its rows and offset move together, so an
    unchanged offset means both streams saw the same records)."""
    key = (task.topic, task.partition)
    for _ in range(ATTEMPTS):
        result = verify_partition(store, log, task, max_jobs, samples)
        now = store.offsets([key]).get(key, 0)
        if now == task.end:
            break
        task = replace(task, end=now)
    return result


def partition_tasks(live: ReadStore, prefix: str, scope: Scope) -> list[PartitionTask]:
    """Every partition in scope, with the offset the live projection has reached."""
    wanted = [
        (row.name, queue_topic(prefix, row.name), partition)
        for row in live.queues()
        for partition in range(row.partitions)
        if scope.covers(row.name, partition)
    ]
    ends = live.offsets((topic, partition) for _, topic, partition in wanted)
    return [
        PartitionTask(queue, topic, partition, ends.get((topic, partition), 0))
        for queue, topic, partition in wanted
    ]


def verify_catalog(
    live: ReadStore, log: Log, prefix: str, scope: Scope, samples: int
) -> list[TableDiff]:
    """The queues the catalog's records before the live catalog offset create, against
    the live `queues` table (as the catalog projector folds them: catalog.py), and the
    schedules' ticks they leave, against the live `schedule_ticks` (schedule_ticks.py)."""
    topic = catalog_topic(prefix)
    end = live.offsets([(topic, 0)]).get((topic, 0), 0)
    expected: dict[str, QueueRow] = {}
    expected_ticks: dict[tuple[str, str], ScheduleTick] = {}
    records = read_partition(log, topic, 0, 0, end)
    with _closing(records):
        for record in records:
            envelope = codec.decode(record.value)
            for event in envelope.events:
                fold_tick(expected_ticks, expected, event, envelope.at)
                fold_queue_event(expected, event, envelope.at)
    queues, ticks = TableDiff("queues"), TableDiff("schedule_ticks")

    def in_scope(name: str) -> bool:
        return scope.queues is None or name in scope.queues

    compare_sorted(
        sorted((r for r in expected.values() if in_scope(r.name)), key=lambda r: r.name),
        sorted((r for r in live.queues() if in_scope(r.name)), key=lambda r: r.name),
        lambda r: r.name,
        queues,
        asdict,
        samples,
    )
    compare_sorted(
        sorted(t for t in expected_ticks.values() if in_scope(t.queue)),
        sorted(t for t in live.schedule_ticks() if in_scope(t.queue)),
        lambda t: (t.queue, t.schedule),
        ticks,
        ScheduleTick._asdict,
        samples,
    )
    return [queues, ticks]


def _open_worker(open_ports: Callable[[], Ports]) -> None:
    _worker["ports"] = store, log = open_ports()
    atexit.register(log.close)
    atexit.register(store.close)


def _verify_in_worker(task: PartitionTask, max_jobs: int, samples: int) -> PartitionResult:
    store, log = _worker["ports"]  # opened by the process's initializer
    return verify_settled(store, log, task, max_jobs, samples)


def verify(
    live: ReadStore,
    log: Log,
    prefix: str,
    scope: Scope,
    *,
    workers: int = 1,
    open_ports: Callable[[], Ports] | None = None,
    max_jobs: int = MAX_JOBS,
    samples: int = 5,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Compare the live projection of `scope` with a fold of the log, writing nothing.
    With `workers` > 1 and `open_ports` (a picklable function opening a store and a
    log in a worker process), partitions are verified in that many processes."""
    started = time.monotonic()
    skips = catalog_skips(log, prefix)
    tasks = sorted(
        (
            replace(t, skipped=frozenset(skips.get((t.queue, t.partition), {})))
            for t in partition_tasks(live, prefix, scope)
        ),
        key=lambda t: -t.end,
    )
    total = sum(t.end for t in tasks)
    jobs, job_events = TableDiff("jobs"), TableDiff("job_events")
    events = 0

    def absorb(result: PartitionResult) -> None:
        nonlocal events
        events += result.events
        jobs.add(result.jobs, samples)
        job_events.add(result.job_events, samples)
        if progress is not None:
            progress(events, total)

    if workers > 1 and open_ports is not None and len(tasks) > 1:
        with ProcessPoolExecutor(
            max_workers=min(workers, len(tasks)) - 1,
            # Not fork: the parent's Kafka client threads must not be copied mid-flight.
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_open_worker,
            initargs=(open_ports,),
        ) as pool:
            # The workers take the largest partitions first; this process, one of the
            # workers too, takes from the smallest end every task no worker has started
            # (a task cancelled before it starts is this process's to do). It starts at
            # once, while the workers are still importing.
            futures = [pool.submit(_verify_in_worker, t, max_jobs, samples) for t in tasks]
            for task, future in reversed(list(zip(tasks, futures, strict=True))):
                if future.cancel():
                    absorb(verify_settled(live, log, task, max_jobs, samples))
            for future in futures:
                if not future.cancelled():
                    absorb(future.result())
    else:
        for task in tasks:
            absorb(verify_settled(live, log, task, max_jobs, samples))
    catalog = verify_catalog(live, log, prefix, scope, samples)
    return ReplayReport(
        events=events,
        seconds=time.monotonic() - started,
        diffs=[*catalog, jobs, job_events],
        compared=True,
    )
