"""Moving a partition between store shards (docs/performance.md, "Moving a partition";
docs/guides/scaling.md#moving-a-partition): its speed, and how long the partition's
dequeues pause.

    python -m bench.move [--jobs 100000] [--rounds 3] [--target postgres|mysql]

One server with a shard map of two stores: the stack's Postgres database (home, a) and
a second one (b): another Postgres database on the same server, or MariaDB. A queue of
one partition holds `--jobs` finished jobs (written through the ledger writer as
bench.replay_ab writes them: three events per job) and a backlog of pending ones; a
client enqueues and a worker dequeues and acks throughout. The partition is moved to b,
back to a, and so on, `--rounds` times. Each round prints the replay's speed (jobs/s of
the partition, events/s), the longest gap between two dequeues that returned jobs from
the switch to the end of the round (the pause), and the clean-up's rows/s; then the
medians. Everything it made is removed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from bench.replay_ab import write_log
from pinledger.client import PinLaterClient
from pinledger.client.jobs import Job
from pinledger.ledger import formats
from pinledger.ledger.events import Actor, Enqueued
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.factory import open_store
from pinledger.projections.pg.databases import sibling_database
from pinledger.projections.store import LedgerStore
from pinledger.service.assembly import open_shards
from pinledger.service.config import Config
from pinledger.service.shards.moves import Mover
from pinledger.service.shards.shard_map import load_shard_map
from pinledger.service.testing.servers import ServerProcess, running, wait_for

ACTOR = Actor(source="bench:move", request_id="", server="bench")
SECOND_PG_DB = "pinledger_shard_b"


def _second_shard(target: str, home: str) -> str:
    """The target shard's DSN: another database on the stack's Postgres, or MariaDB."""
    if target == "postgres":
        return sibling_database(home, SECOND_PG_DB)
    return os.environ["PINLEDGER_MYSQL_DSN"]


class Worker:
    """Dequeues and acks all the time; keeps when each dequeue that returned jobs ended."""

    def __init__(self, address: str, queue: str) -> None:
        self.address, self.queue = address, queue
        self.served: list[float] = []
        self.enqueued = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with PinLaterClient([self.address], source="bench:move-worker") as client:
            n = 0
            while not self.stop.is_set():
                client.enqueue(self.queue, [Job(b"during %d" % n)])
                n += 1
                self.enqueued = n
                jobs = client.dequeue(self.queue, 5)
                if jobs:
                    self.served.append(time.monotonic())
                    client.ack(self.queue, succeeded=[j.descriptor for j in jobs])

    def longest_gap(self, since: float, until: float) -> float:
        times = [t for t in self.served if since <= t <= until]
        return max((b - a for a, b in itertools.pairwise(times)), default=until - since)


def _written(
    log: KafkaLog, store: LedgerStore, prefix: str, queue: str, args: argparse.Namespace
) -> LedgerWriter:
    """Write the queue's jobs into its one partition; wait until the server projected
    them."""
    writer = LedgerWriter(log, prefix)
    writer.follow_format(formats.LATEST)
    started = time.monotonic()
    write_log(writer, queue, 1, args.jobs)
    for done in range(0, args.pending, 1000):
        batch = [Enqueued(b"x" * 64, 1, 0, 3)] * min(1000, args.pending - done)
        writer.enqueue(queue, 0, batch, int(time.time() * 1000), ACTOR)
    topic = writer.topic(queue)
    end = log.end_offsets([(topic, 0)])[(topic, 0)]
    wait_for(lambda: store.offsets([(topic, 0)]).get((topic, 0), 0) >= end, timeout=600)
    print(
        f"{args.jobs:,} finished and {args.pending:,} pending jobs written and "
        f"projected in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return writer


def _rounds(
    mover: Mover, worker: Worker, queue: str, args: argparse.Namespace
) -> list[tuple[float, float, float]]:
    """Move the partition back and forth; per round: jobs/s, pause, rows/s removed."""
    results = []
    for round_ in range(args.rounds):
        target = "b" if round_ % 2 == 0 else "a"
        jobs = args.jobs + args.pending + worker.enqueued
        report = mover.move(queue, 0, target, lambda: int(time.time() * 1000))
        after = time.monotonic()
        switched = after - report.clean_s - mover.settle_s
        pause = worker.longest_gap(switched - 0.5, after)
        rate = jobs / report.build_s
        results.append((rate, pause, report.removed / max(report.clean_s, 1e-9)))
        print(
            f"round {round_ + 1}: to {target}: ~{jobs:,} jobs replayed in "
            f"{report.build_s:.1f} s = {rate:,.0f} jobs/s; longest dequeue gap "
            f"from the switch on {pause:.2f} s; {report.removed:,} rows removed in "
            f"{report.clean_s:.1f} s",
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.move", description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", choices=("postgres", "mysql"), default="postgres")
    args = parser.parse_args(argv)
    config = Config.from_env()
    tag = uuid.uuid4().hex[:8]
    prefix, schema, queue = f"movebench{tag}.", f"movebench_{tag}", "moved"
    home = config.store_url
    second = _second_shard(args.target, home)
    work = Path(tempfile.mkdtemp(prefix="pinledger-move-bench-"))
    map_path = work / "shards.json"
    map_path.write_text(
        json.dumps({"shards": [{"name": "a", "dsn": home}, {"name": "b", "dsn": second}]})
    )
    shard_map = load_shard_map(str(map_path), home)
    settings = {"PINLEDGER_STORE_SHARDS": str(map_path), "PINLEDGER_PARTITIONS": "1"}
    server = ServerProcess(prefix=prefix, schema=schema, settings=settings)
    log = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id="pinledger-bench"))
    store = open_shards(shard_map, schema, prefix, max_size=2, current=lambda: shard_map)
    results: list[tuple[float, float, float]] = []
    try:
        with running([server], work):
            address = f"127.0.0.1:{server.port}"
            with PinLaterClient([address]) as client:
                client.create_queue(queue)
            writer = _written(log, store, prefix, queue, args)
            worker = Worker(address, queue)
            worker.thread.start()
            mover = Mover(
                store,
                log,
                writer,
                shard_map,
                ACTOR,
                say=lambda line: print(line, file=sys.stderr),
                settle_s=3.0,
            )
            results = _rounds(mover, worker, queue, args)
            worker.stop.set()
            worker.thread.join(timeout=30)
    finally:
        store.close()
        for name in ("a", "b"):
            shard = shard_map.get(name)
            assert shard is not None
            dropped = open_store(shard.dsn, schema)
            try:
                dropped.drop()
            finally:
                dropped.close()
        for topic in log.topics():
            if topic.startswith(prefix):
                log.delete_topic(topic)
        log.close()
    rates, pauses, cleans = zip(*results, strict=True)
    print(
        f"median: {statistics.median(rates):,.0f} jobs/s replayed, longest dequeue gap "
        f"{statistics.median(pauses):.2f} s, {statistics.median(cleans):,.0f} rows/s removed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
