"""`python -m bench`: start a `pinledger serve` on free ports with a fresh topic prefix
and schema, measure enqueue, completion, latency and replay, run the same enqueue +
complete workload on PgQueuer in the same Postgres, and print one table.

    python -m bench            # the full run (a few minutes)
    python -m bench --quick    # about a minute
    python -m bench --quick --smoke   # tiny counts: does every part still run?
    python -m bench --scale --jobs 200000   # a backlog: memory, latency, takeover (bench/scale.py)

Everything it creates (topics, schemas) is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import psycopg

from bench import pinledger_load as load
from bench import scale
from bench.peer import Peer
from bench.stats import percentile
from bench.table import Row, render
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.projections.factory import is_mysql, open_store
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, running

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Sizes:
    single_jobs: int
    batched_jobs: int
    complete_b1: int
    complete_b50: int
    dequeue_samples: int
    visible_samples: int
    enqueue_batch: int = 100
    dequeue_batch: int = 50


FULL = Sizes(20_000, 300_000, 10_000, 60_000, 3_000, 300)
QUICK = Sizes(3_000, 60_000, 2_000, 20_000, 500, 100)
SMOKE = Sizes(100, 1_000, 100, 500, 50, 10)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about a minute)")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks it runs")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads/connections")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each queue")
    parser.add_argument("--no-peer", action="store_true", help="skip the PgQueuer side")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="the scale run instead: a backlog of --jobs jobs of 512 B (bench/scale.py)",
    )
    parser.add_argument("--jobs", type=int, default=2_000_000, help="jobs in the --scale run")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record the server with py-spy during the pinledger part (collapsed stacks)",
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.partitions < 1 or args.jobs < 1:
        parser.error("--concurrency, --partitions and --jobs must be at least 1")
    return args


def kafka_version() -> str:
    """The broker the dev stack runs (pinned in stack/pom.xml): Kafka's protocol does
    not report the exact release."""
    pom = ROOT / "stack" / "pom.xml"
    found = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom.read_text())
    return f"{found.group(1)} (stack/pom.xml)" if found else "unknown"


def postgres_settings(dsn: str) -> tuple[str, str]:
    with psycopg.connect(dsn) as conn:
        server = conn.execute("SHOW server_version").fetchone()
        commit = conn.execute("SHOW synchronous_commit").fetchone()
    return (str(server[0]) if server else "?", str(commit[0]) if commit else "?")


def setup_rows(args: argparse.Namespace, sizes: Sizes, config: Config) -> list[tuple[str, str]]:
    pg_version, synchronous_commit = postgres_settings(config.pg_dsn)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    return [
        ("run", f"{mode} (python -m bench{' --quick' if args.quick else ''})"),
        ("machine", f"{os.cpu_count()} cores, {platform.machine()}, {platform.system()}"),
        ("python", platform.python_version()),
        ("kafka", kafka_version()),
        # The store the server projects into: PINLEDGER_STORE_DSN (README "Running on
        # MySQL"); Postgres otherwise. The peer always runs on Postgres.
        ("pinledger store", "MySQL (MariaDB)" if is_mysql(config.store_url) else "Postgres"),
        ("postgres", pg_version),
        ("postgres synchronous_commit", synchronous_commit),
        (
            "kafka-python / psycopg / thriftpy2",
            " / ".join(version(p) for p in ("kafka-python", "psycopg", "thriftpy2")),
        ),
        ("peer", "none (--no-peer)" if args.no_peer else f"PgQueuer {version('pgqueuer')}"),
        ("partitions per queue", str(args.partitions)),
        ("concurrency", f"{args.concurrency} client threads (peer: connections)"),
        ("batch sizes", f"enqueue {sizes.enqueue_batch}, dequeue 1 and {sizes.dequeue_batch}"),
        ("producer", f"acks=all, idempotent, linger {KafkaSettings().linger_ms} ms"),
        (
            "jobs",
            f"{sizes.single_jobs:,} single, {sizes.batched_jobs:,} batched enqueues; "
            f"{sizes.complete_b1:,} / {sizes.complete_b50:,} completed at batch 1 / "
            f"{sizes.dequeue_batch}",
        ),
        ("load generator", "one process on the same machine as Kafka, Postgres, server"),
    ]


@contextmanager
def profiled(pid: int, directory: str | None) -> Iterator[None]:
    if directory is None:
        yield
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    out = Path(directory) / "server.collapsed.txt"
    spy = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "100",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.send_signal(2)
        spy.wait(timeout=60)
        print(f"profile written to {out}", file=sys.stderr)


def measure_pinledger(
    server: ServerProcess, args: argparse.Namespace, sizes: Sizes, config: Config
) -> dict[str, float]:
    port, threads = server.port, args.concurrency
    figures: dict[str, float] = {}
    queue = load.create_queue(port)
    figures["enqueue_single"] = load.enqueue(
        port, queue, sizes.single_jobs, 1, threads, "enqueue, 1 job per call"
    )
    figures["enqueue_batch"] = load.enqueue(
        port,
        queue,
        sizes.batched_jobs,
        sizes.enqueue_batch,
        threads,
        f"enqueue, {sizes.enqueue_batch} jobs per call",
    )
    one = load.complete(
        port, load.create_queue(port), sizes.complete_b1, 1, threads, "complete, batch 1"
    )
    figures["complete_b1"] = one.rate
    figures["loaded_p99"] = percentile(one.latencies_ms, 0.99)
    many = load.complete(
        port,
        load.create_queue(port),
        sizes.complete_b50,
        sizes.dequeue_batch,
        threads,
        f"complete, batch {sizes.dequeue_batch}",
    )
    figures["complete_b50"] = many.rate
    alone = load.complete(
        port,
        load.create_queue(port),
        sizes.dequeue_samples,
        1,
        1,
        "dequeue latency, 1 client",
        piggyback=False,
    )
    figures["dequeue_p50"] = percentile(alone.latencies_ms, 0.50)
    figures["dequeue_p99"] = percentile(alone.latencies_ms, 0.99)
    acking = load.complete(
        port,
        load.create_queue(port),
        sizes.dequeue_samples,
        1,
        1,
        "dequeue + ack latency, 1 client",
    )
    figures["acking_p50"] = percentile(acking.latencies_ms, 0.50)
    figures["acking_p99"] = percentile(acking.latencies_ms, 0.99)
    visible = load.visible(port, load.create_queue(port), sizes.visible_samples)
    figures["visible_p50"] = percentile(visible, 0.50)
    figures["visible_p99"] = percentile(visible, 0.99)
    return figures


def measure_peer(args: argparse.Namespace, sizes: Sizes, config: Config) -> dict[str, float]:
    peer = Peer(config.pg_dsn)
    threads = args.concurrency
    try:
        peer.install()
        return {
            "enqueue_single": peer.enqueue(sizes.single_jobs, 1, threads, "enqueue, 1 per call"),
            "enqueue_batch": peer.enqueue(
                sizes.batched_jobs,
                sizes.enqueue_batch,
                threads,
                f"enqueue, {sizes.enqueue_batch} per call",
            ),
            "complete_b1": peer.complete(sizes.complete_b1, 1, threads, "complete, batch 1"),
            "complete_b50": peer.complete(
                sizes.complete_b50,
                sizes.dequeue_batch,
                threads,
                f"complete, batch {sizes.dequeue_batch}",
            ),
        }
    finally:
        peer.close()


def rows(ours: dict[str, float], peer: dict[str, float], sizes: Sizes, threads: int) -> list[Row]:
    b = sizes.dequeue_batch
    return [
        Row(
            "enqueue, 1 job per call",
            ours["enqueue_single"],
            "jobs/s",
            ">= 3000",
            peer.get("enqueue_single"),
        ),
        Row(
            f"enqueue, {sizes.enqueue_batch} jobs per call",
            ours["enqueue_batch"],
            "jobs/s",
            ">= 20000",
            peer.get("enqueue_batch"),
        ),
        Row(
            "completed (dequeue + piggybacked ack), batch 1",
            ours["complete_b1"],
            "jobs/s",
            "",
            peer.get("complete_b1"),
        ),
        Row(
            f"completed (dequeue + piggybacked ack), batch {b}",
            ours["complete_b50"],
            "jobs/s",
            ">= 15000",
            peer.get("complete_b50"),
        ),
        Row("dequeue latency p50 (1 client, batch 1)", ours["dequeue_p50"], "ms", "<= 1"),
        Row("dequeue latency p99 (1 client, batch 1)", ours["dequeue_p99"], "ms", "<= 5"),
        Row("dequeue + piggybacked ack p50 (1 client)", ours["acking_p50"], "ms"),
        Row("dequeue + piggybacked ack p99 (1 client)", ours["acking_p99"], "ms"),
        Row(
            f"dequeue + ack p99 under load ({threads} clients, batch 1)",
            ours["loaded_p99"],
            "ms",
        ),
        Row("enqueue -> first dequeue p50", ours["visible_p50"], "ms", "<= 5"),
        Row("enqueue -> first dequeue p99", ours["visible_p99"], "ms"),
        Row("replay (verify, one process per core)", ours["replay"], "events/s", ">= 100000"),
        Row("replay into a scratch projection", ours["replay_scratch"], "events/s"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scale:
        return scale_main(args)
    sizes = SMOKE if args.smoke else QUICK if args.quick else FULL
    config = Config.from_env()
    setup = setup_rows(args, sizes, config)
    tag = uuid.uuid4().hex[:10]
    server = ServerProcess(
        prefix=f"bench{tag}.",
        schema=f"bench_{tag}",
        settings={
            "PINLEDGER_KAFKA": config.kafka,
            "PINLEDGER_PG_DSN": config.pg_dsn,
            "PINLEDGER_STORE_DSN": config.store_url,
            "PINLEDGER_PARTITIONS": str(args.partitions),
        },
    )
    print(
        f"benchmark ({setup[0][1]}): server on port {server.port}, topics {server.prefix}*, "
        f"schema {server.schema}",
        file=sys.stderr,
        flush=True,
    )
    try:
        with tempfile.TemporaryDirectory(prefix="pinledger-bench-") as logs:
            with running([server], Path(logs)):
                assert server.proc is not None
                with profiled(server.proc.pid, args.profile):
                    ours = measure_pinledger(server, args, sizes, config)
            replayed = load.replay_rate(
                config.kafka, config.store_url, server.prefix, server.schema
            )
            ours["replay"] = replayed.rate
            rebuilt = load.scratch_replay_rate(
                config.kafka, config.store_url, server.prefix, server.schema
            )
            ours["replay_scratch"] = rebuilt.rate
            if not (replayed.identical and rebuilt.identical):
                print("WARNING: the replay differs from the live projection", file=sys.stderr)
        peer = {} if args.no_peer else measure_peer(args, sizes, config)
    finally:
        cleanup(config, server)
    print()
    print(render(setup, rows(ours, peer, sizes, args.concurrency), "PgQueuer"), flush=True)
    return 0


def scale_main(args: argparse.Namespace) -> int:
    config = Config.from_env()
    figures = scale.run(args.jobs, args.partitions, args.concurrency, config, cleanup)
    print()
    width = max(len(name) for name, _ in figures)
    for name, value in figures:
        print(f"{name:<{width}}  {value}")
    return 0


def cleanup(config: Config, server: ServerProcess) -> None:
    log = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id="pinledger-bench"))
    try:
        for topic in log.topics():
            if topic.startswith(server.prefix):
                log.delete_topic(topic)
    finally:
        log.close()
    open_store(config.store_url, server.schema).drop()


if __name__ == "__main__":
    sys.exit(main())
