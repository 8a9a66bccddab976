"""`pinledger import-pinlater`: moves the jobs of a PinLater MySQL deployment onto the
ledger (issue 16, item 3).

For every job of every `plq_<shard>_<queue>` database (tables `jobs_p<priority>`) it
appends the events that give the job its current state, through the same state
machine as every other job (ledger/state.py: nothing here sets a state):

- the job's enqueue (body, priority, attempts allowed, custom status, run_after);
- then, for attempts already used, a claim and a failure each (attempts_remaining
  goes down one per failure, as a worker's failed ack would make it);
- PENDING: a claim and a checkpoint back to pending at the job's run_after (only when
  attempts were used: otherwise the enqueue carries run_after itself);
- IN_PROGRESS: a claim under the job's PinLater claim descriptor, by
  `pinlater-import`: its worker cannot ack it (acks are fenced by claim source), so it
  times out after PINLEDGER_CLAIM_TIMEOUT_S and runs again, as after a PinLater crash;
- SUCCEEDED: a claim and a success; FAILED: a claim and a failure on the last attempt.

A queue's shards become its partitions (in shard order); a queue missing on the
ledger is created with that many partitions. Each page of up to 1000 jobs is one
enqueue record (or a few, by body size) and one record of the following events; the
page's new descriptors are then written to `pinledger_import` in the shard's database,
so a second run imports only what the first did not. (A crash between a page's append
and that write imports the page again on the next run: at most one page per shard.)
Created and updated times become the import's time.

Each enqueue names the job's PinLater descriptor (`Enqueued.imported_from`): the
projection maps it to the new one, for lookupJobs and getJobHistory. Before a queue's
first page, import_guard.py makes sure no pinledger descriptor can ever equal one of
them (docs/decisions/0017-imported-descriptors.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pinledger.cli.import_guard import ImportRefusedError, make_room, old_descriptor
from pinledger.ledger import limits
from pinledger.ledger.adapters import KafkaClientLog
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import (
    Actor,
    Checkpointed,
    Claimed,
    Enqueued,
    Event,
    Failed,
    Succeeded,
)
from pinledger.ledger.state import JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pinlater.reader import PinLaterJob, PinLaterShard, PinLaterSource
from pinledger.service.assembly import open_log
from pinledger.service.config import Config

SOURCE = "pinlater-import"
PAGE = 1000
# Events per follow-up record: well under Kafka's 1 MiB record limit.
EVENTS_PER_RECORD = 5000


def attempts_used(job: PinLaterJob) -> int:
    """Claim-and-fail rounds that bring attempts_remaining from attempts_allowed down
    to the job's. A round at one attempt left would fail the job for good, so only a
    FAILED job's last round goes there (then its own final failure)."""
    allowed = max(job.attempts_allowed, 0)
    if job.state == JobState.FAILED:
        return max(allowed, 1) - 1
    return max(allowed - max(job.attempts_remaining, 1), 0)


def enqueue_event(job: PinLaterJob, priority: int, now: int, old: str | None = None) -> Enqueued:
    """The job's enqueue, naming its PinLater descriptor `old`. A job claimed afterwards
    must be due at `now` (a claim is refused before run_after); a pending one whose
    attempts are not used keeps its run_after here."""
    keeps_run_after = job.state == JobState.PENDING and attempts_used(job) == 0
    return Enqueued(
        body=job.body,
        priority=priority,
        run_after=job.run_after if keeps_run_after else min(job.run_after, now),
        attempts_allowed=max(job.attempts_allowed, 0),
        custom_status=job.custom_status,
        imported_from=old,
    )


def check_importable(job: PinLaterJob, old: str) -> None:
    """ImportRefusedError naming the job when its text is some no store can hold (the
    rules of ledger/limits.py, as a request's): a record holding it could never be
    projected. Checked for a whole page before any of it is appended."""
    for rule, value in (
        (limits.CUSTOM_STATUS, job.custom_status),
        (limits.IMPORTED_DESCRIPTOR, old),
        (limits.IMPORTED_CLAIM, job.claim_descriptor),
    ):
        wrong = None if value is None else limits.problem(rule, value)
        if wrong is not None:
            raise ImportRefusedError(
                f"PinLater job {limits.shown(old, 120)}: its {rule.name} {wrong}; nothing of "
                "its page was imported: fix (or delete) the job in PinLater's database, then "
                "run the import again (what was imported stays imported)"
            )


def follow_ups(job: PinLaterJob, local_id: int) -> list[Event]:
    """The events after the enqueue that bring the job to its PinLater state."""
    events: list[Event] = []
    for round_ in range(attempts_used(job)):
        events += [Claimed(local_id, f"{SOURCE}:{round_}"), Failed(local_id)]
    match JobState(job.state):
        case JobState.PENDING:
            if events:
                events += [
                    Claimed(local_id, SOURCE),
                    Checkpointed(local_id, move_to_pending=True, run_after=job.run_after),
                ]
        case JobState.IN_PROGRESS:
            events.append(Claimed(local_id, job.claim_descriptor or SOURCE))
        case JobState.SUCCEEDED:
            events += [Claimed(local_id, SOURCE), Succeeded(local_id)]
        case JobState.FAILED:
            events += [Claimed(local_id, SOURCE), Failed(local_id)]
    return events


def shard_order(shard: PinLaterShard) -> tuple[int, int | str]:
    """Numeric shard names in numeric order, then the others by name."""
    return (0, int(shard.shard)) if shard.shard.isdigit() else (1, shard.shard)


@dataclass(slots=True)
class Summary:
    queues: int = 0
    jobs: int = 0
    by_state: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


def run_import(
    source: PinLaterSource,
    writer: LedgerWriter,
    log: KafkaClientLog,
    queues: Sequence[str] = (),
    clock: Callable[[], int] = lambda: int(time.time() * 1000),
    say: Callable[[str], None] = print,
) -> Summary:
    """Import every job of the deployment (or of `queues`) not imported yet."""
    actor = Actor(source=SOURCE, request_id="", server=SOURCE)
    summary = Summary()
    started = time.monotonic()
    by_queue: dict[str, list[PinLaterShard]] = {}
    for shard in source.shards(queues):
        by_queue.setdefault(shard.queue, []).append(shard)
    for queue, shards in sorted(by_queue.items()):
        shards.sort(key=shard_order)
        writer.create_queue(queue, len(shards), clock(), actor)
        partitions = log.partition_count(writer.topic(queue)) or len(shards)
        summary.queues += 1
        for shard in shards:
            source.prepare(shard)
        # Before the queue's first import: see import_guard.py.
        room = make_room(source, writer, log, queue, shards, partitions, clock(), actor)
        for partition, count in sorted(room.fillers.items()):
            say(
                f"{queue} partition {partition}: {count} empty records make room for PinLater's ids"
            )
        for index, shard in enumerate(shards):
            for priority in shard.priorities:
                total = source.count(shard, priority)
                done = _import_table(
                    source,
                    writer,
                    (shard, priority, room.upto.get((shard.database, priority), -1)),
                    queue,
                    index % partitions,
                    actor,
                    clock,
                    summary,
                )
                say(
                    f"{shard.database}.jobs_p{priority} -> {queue} partition "
                    f"{index % partitions}: {done} imported ({total} in the table)"
                )
    summary.seconds = time.monotonic() - started
    return summary


def _import_table(
    source: PinLaterSource,
    writer: LedgerWriter,
    table: tuple[PinLaterShard, int, int],
    queue: str,
    partition: int,
    actor: Actor,
    clock: Callable[[], int],
    summary: Summary,
) -> int:
    """Import the jobs of one table (shard, priority) up to local id `upto`."""
    shard, priority, upto = table
    done, after = 0, -1
    while page := source.jobs(shard, priority, after, PAGE, upto):
        now = clock()
        olds = [old_descriptor(queue, shard.shard, priority, job.local_id) for job in page]
        for job, old in zip(page, olds, strict=True):
            check_importable(job, old)
        enqueues = [
            enqueue_event(job, priority, now, old) for job, old in zip(page, olds, strict=True)
        ]
        descriptors = writer.enqueue(queue, partition, enqueues, now, actor)
        following = [
            event
            for job, d in zip(page, descriptors, strict=True)
            for event in follow_ups(job, d.local_id)
        ]
        batches: list[tuple[str, int, Sequence[Event]]] = [
            (queue, partition, following[i : i + EVENTS_PER_RECORD])
            for i in range(0, len(following), EVENTS_PER_RECORD)
        ]
        if batches:
            writer.append_many(batches, now, actor)
        source.record(shard, priority, _mapping(page, descriptors))
        for job in page:
            name = JobState(job.state).name
            summary.by_state[name] = summary.by_state.get(name, 0) + 1
        summary.jobs += len(page)
        done += len(page)
        after = page[-1].local_id
    return done


def _mapping(page: Sequence[PinLaterJob], descriptors: Sequence[JobDescriptor]) -> dict[int, str]:
    return {job.local_id: str(d) for job, d in zip(page, descriptors, strict=True)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        help="the PinLater MySQL server: mysql://user:password@host:port/ (every plq_* "
        "database on it is read)",
    )
    parser.add_argument("--queue", action="append", default=[], help="only this queue (repeatable)")


def run(config: Config, args: argparse.Namespace) -> int:
    source = PinLaterSource(args.source)
    log = open_log(config)
    try:
        writer = LedgerWriter(log, config.topic_prefix, config.record_limit())
        writer.ensure_catalog(int(time.time() * 1000), Actor(source=SOURCE, server=SOURCE))
        summary = run_import(source, writer, log, args.queue)
    except ImportRefusedError as exc:
        print(f"pinledger import-pinlater: {exc}", file=sys.stderr)
        return 2
    finally:
        log.close()
        source.close()
    states = ", ".join(f"{n} {state}" for state, n in sorted(summary.by_state.items()))
    print(
        f"imported {summary.jobs} jobs of {summary.queues} queues in {summary.seconds:.1f} s "
        f"({summary.rate:,.0f} jobs/s){': ' + states if states else ''}"
    )
    return 0
