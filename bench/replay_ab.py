"""The replay A/B of docs/performance-history.md ("Replay"): one log, several ways of checking
it against its live projection, alternated round by round on the same data.

    python -m bench.replay_ab [--jobs 40000] [--partitions 4] [--rounds 3]

Writes `--jobs` jobs through the ledger writer as the benchmark's load does (enqueues of
100 per record, claims and acks of 50 per record: three events per job) on a topic
prefix and schema of its own, projects them, then times each variant per round and
prints the events/s of each round and the median. Everything it made is removed.
"""

from __future__ import annotations

import argparse
import functools
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from pinledger.ledger.events import Actor, Claimed, Enqueued, Succeeded
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Log
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections import verify as verify_module
from pinledger.projections.factory import open_store
from pinledger.projections.projector import ProjectionRunner, Scope
from pinledger.projections.replay import ReplayReport, replay
from pinledger.projections.store import LedgerStore
from pinledger.service.config import Config

ACTOR = Actor(source="bench:replay", request_id="", server="bench")
BODY = b"x" * 64


def write_log(writer: LedgerWriter, queue: str, partitions: int, jobs: int) -> None:
    """Enqueue, claim and ack `jobs` jobs spread over the partitions."""
    at = 1_700_000_000_000
    per_partition = jobs // partitions
    for partition in range(partitions):
        done = 0
        while done < per_partition:
            count = min(1000, per_partition - done)
            descriptors = writer.enqueue(
                queue,
                partition,
                [Enqueued(BODY, 1, at, 3) for _ in range(count)],
                at,
                ACTOR,
            )
            ids = [d.local_id for d in descriptors]
            batches = [ids[i : i + 50] for i in range(0, len(ids), 50)]
            writer.append_many(
                [(queue, partition, [Claimed(i, f"c{b[0]}") for i in b]) for b in batches],
                at + 1,
                ACTOR,
            )
            writer.append_many(
                [(queue, partition, [Succeeded(i) for i in b]) for b in batches], at + 2, ACTOR
            )
            done += count


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the verify's workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def open_ports(kafka: str, store_url: str, schema: str) -> tuple[LedgerStore, Log]:
    return open_store(store_url, schema), KafkaLog(
        KafkaSettings(bootstrap=kafka, client_id="pinledger-bench")
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_ab", description=__doc__)
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", action="append", help="run only these variants (repeatable)", default=None
    )
    return parser.parse_args(argv)


def prepare(log: KafkaLog, live: LedgerStore, prefix: str, args: argparse.Namespace) -> None:
    """Write the jobs and project them into the live schema."""
    writer = LedgerWriter(log, prefix)
    writer.create_queue("q", args.partitions, 0, ACTOR)
    started = time.monotonic()
    write_log(writer, "q", args.partitions, args.jobs)
    print(f"wrote {args.jobs:,} jobs in {time.monotonic() - started:.1f}s", file=sys.stderr)
    runner = ProjectionRunner(live, log, prefix)
    try:
        started = time.monotonic()
        projected = runner.catch_up()
    finally:
        runner.close()
    print(f"projected {projected:,} events in {time.monotonic() - started:.1f}s", file=sys.stderr)


def alternate(variants: dict[str, Callable[[], ReplayReport]], rounds: int) -> None:
    """Run each variant once per round, in turn; print each run and the medians."""
    rates: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds):
        for name, run in variants.items():
            before = _cpu_seconds()
            report = run()
            rate = report.events / report.seconds
            rates[name].append(rate)
            cpu[name].append((_cpu_seconds() - before) / report.events * 1e6)
            print(
                f"round {round_ + 1}: {name}: {report.events:,} events in "
                f"{report.seconds:.2f}s = {rate:,.0f} events/s, "
                f"{cpu[name][-1]:.1f} CPU us/event (this process and its workers)"
                f"{'' if report.identical else ' (DIFFERENT)'}",
                file=sys.stderr,
                flush=True,
            )
    print()
    for name, found in rates.items():
        runs = ", ".join(f"{r:,.0f}" for r in found)
        print(
            f"{name:<40} median {statistics.median(found):>9,.0f} events/s, "
            f"{statistics.median(cpu[name]):5.1f} CPU us/event  ({runs})"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = Config.from_env()
    tag = uuid.uuid4().hex[:8]
    prefix, schema = f"replayab{tag}.", f"replayab_{tag}"
    log = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id="pinledger-bench"))
    live = open_store(config.store_url, schema)
    live.migrate()
    ports = functools.partial(open_ports, config.kafka, config.store_url, schema)

    def into_schema() -> ReplayReport:
        scratch = open_store(config.store_url, f"{schema}_scratch")
        try:
            return replay(live, scratch, log, prefix, Scope())
        finally:
            scratch.drop()

    def verifying(workers: int) -> Callable[[], ReplayReport]:
        return lambda: verify_module.verify(
            live, log, prefix, Scope(), workers=workers, open_ports=ports
        )

    variants: dict[str, Callable[[], ReplayReport]] = {
        # The text COPY side of the A/B is gone (issue 21): binary COPY won
        # (docs/performance-history.md, "Replay").
        "into a scratch schema": into_schema,
        "verify, 1 process": verifying(1),
        "verify, 2 processes": verifying(2),
    }
    if args.only:
        variants = {k: v for k, v in variants.items() if any(o in k for o in args.only)}
    try:
        prepare(log, live, prefix, args)
        alternate(variants, args.rounds)
    finally:
        live.drop()
        for topic in log.topics():
            if topic.startswith(prefix):
                log.delete_topic(topic)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
