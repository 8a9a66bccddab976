"""`python -m bench.fold`: the CPU the fold costs per event, with no I/O. The owner
folds every record it consumes (decode, `evolve`, the timeline row, the ledger metrics,
the ready buffer's news) before its commit; `pinledger replay`'s verify folds the log the
same way into lines. Both are pure Python on one thread, so their cost per event bounds
completed jobs at batch 50 and the replay's rate (issue 22, levers 3 and 6).

    python -m bench.fold [--jobs 20000] [--rounds 5] [--profile]

Builds records as the benchmark's load writes them (enqueues of 100 jobs per record,
claims and acks of 50 per record: three events per job), then times, best of
`--rounds`: the owner's side (`PartitionProjector.apply` one record at a time, the
ledger metrics as its observer, a store that writes nothing), and the verify's
(`PartitionFold`: the timeline lines and the jobs' lines). `--profile` adds cProfile's
top functions of each.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

from pinledger.ledger import codec
from pinledger.ledger.descriptor import local_id_for
from pinledger.ledger.events import Actor, Claimed, Enqueued, Envelope, Succeeded
from pinledger.ledger.log import LogRecord
from pinledger.ledger.state import Job
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import PartitionBatch, ProjectorStore
from pinledger.projections.verify_fold import IdRange, PartitionFold
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics

ACTOR = Actor("bench:fold", "request", "server-1")
TRACEPARENT = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
T0 = 1_700_000_000_000


class _NoStore:
    """What the projector asks of a store, answering at once and writing nothing."""

    def offset(self, topic: str, partition: int) -> int:
        return 0

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        return {}

    def skipped_records(self, queue: str, partition: int) -> dict[int, str]:
        return {}

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        pass


def records(jobs: int) -> list[LogRecord]:
    """One partition's log for `jobs` jobs (a multiple of 100): each enqueue record of
    100 jobs followed by its claims and acks, 50 to a record."""
    found: list[LogRecord] = []
    offset = 0

    def append(at: int, events: tuple[Any, ...], headers: codec.Headers) -> None:
        nonlocal offset
        value = codec.encode(Envelope(at, ACTOR, events))
        found.append(LogRecord("q", 0, offset, value, headers))
        offset += 1

    for _ in range(jobs // 100):
        enqueue_offset = offset
        append(
            T0,
            tuple(Enqueued(b"x" * 64, 1, T0, 3) for _ in range(100)),
            [(codec.TRACEPARENT_HEADER, TRACEPARENT)],
        )
        ids = [local_id_for(enqueue_offset, i) for i in range(100)]
        for half in (ids[:50], ids[50:]):
            claim = f"server-1:{half[0]}"
            append(T0 + 1, tuple(Claimed(i, claim) for i in half), [])
            append(T0 + 2, tuple(Succeeded(i, "", claim) for i in half), [])
    return found


def owner_fold(log: list[LogRecord]) -> Metrics:
    """The owner's side: one record per batch, the ledger metrics observing (returned:
    what the ledger applied)."""
    registry = Metrics()
    metrics = LedgerMetrics(registry)
    projector = PartitionProjector(
        cast(ProjectorStore, _NoStore()),
        "q",
        "q",
        0,
        observer=lambda transitions: metrics.observe("q", 0, transitions),
        listener=lambda jobs, claimed: None,
    )
    for record in log:
        projector.apply([record])
    return registry


def verify_fold(log: list[LogRecord]) -> None:
    """The verify's side: every timeline line, then every job's line."""
    fold = PartitionFold(IdRange(), None)
    for _ in fold.events(log):
        pass
    for _ in fold.job_lines():
        pass


def per_event(run: Callable[[list[LogRecord]], object], log: list[LogRecord], rounds: int) -> float:
    """The best of `rounds` runs, in CPU µs per event (3 events per job)."""
    events = len(log) // 5 * 300
    best = min(_cpu(run, log) for _ in range(rounds))
    return best / events * 1e6


def _cpu(run: Callable[[list[LogRecord]], object], log: list[LogRecord]) -> float:
    start = time.process_time()
    run(log)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fold", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs (multiple of 100)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="also cProfile's top functions")
    args = parser.parse_args(argv)
    if args.jobs < 100 or args.jobs % 100:
        parser.error(f"--jobs must be a positive multiple of 100, not {args.jobs}")
    log = records(args.jobs)
    for name, run in (("owner fold", owner_fold), ("verify fold", verify_fold)):
        print(f"{name}: {per_event(run, log, args.rounds):.2f} CPU µs per event", flush=True)
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(run, log)
            pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
