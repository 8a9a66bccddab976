"""The measured phases of `python -m bench`: pinledger's (one server, raw thriftpy2
clients), PgQueuer's and River's, each throughput phase with a CPU window
(bench/cpu.py)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench import cpu, river
from bench import pinledger_load as load
from bench.peer import Peer
from bench.stats import percentile
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess


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


def meter(groups: dict[str, cpu.Group]) -> cpu.Meter | None:
    return cpu.Meter(groups) if cpu.available() else None


def windows(found: cpu.Meter | None) -> dict[str, cpu.Window]:
    """One CPU window per throughput phase (none without /proc)."""
    if found is None:
        return {}
    return {phase: found.window() for phase, _ in PHASES}


# The throughput phases, whose CPU per job the last table shows.
PHASES = (
    ("enqueue_single", "enqueue 1/call"),
    ("enqueue_batch", "enqueue 100/call"),
    ("complete_b1", "completed b1"),
    ("complete_b50", "completed b50"),
)


def measure_pinledger(
    server: ServerProcess,
    args: argparse.Namespace,
    sizes: Sizes,
    config: Config,
    cpus: dict[str, cpu.Window],
) -> dict[str, float]:
    port, threads = server.port, args.concurrency
    figures: dict[str, float] = {}
    queue = load.create_queue(port)
    figures["enqueue_single"] = load.enqueue(
        port,
        queue,
        sizes.single_jobs,
        1,
        threads,
        "enqueue, 1 job per call",
        cpus.get("enqueue_single"),
    )
    figures["enqueue_batch"] = load.enqueue(
        port,
        queue,
        sizes.batched_jobs,
        sizes.enqueue_batch,
        threads,
        f"enqueue, {sizes.enqueue_batch} jobs per call",
        cpus.get("enqueue_batch"),
    )
    one = load.complete(
        port,
        load.create_queue(port),
        sizes.complete_b1,
        1,
        threads,
        "complete, batch 1",
        cpu=cpus.get("complete_b1"),
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
        cpu=cpus.get("complete_b50"),
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


def measure_peer(
    args: argparse.Namespace, sizes: Sizes, config: Config, cpus: dict[str, cpu.Window]
) -> dict[str, float]:
    peer = Peer(config.pg_dsn)
    threads = args.concurrency
    try:
        peer.install()
        return {
            "enqueue_single": peer.enqueue(
                sizes.single_jobs, 1, threads, "enqueue, 1 per call", cpus.get("enqueue_single")
            ),
            "enqueue_batch": peer.enqueue(
                sizes.batched_jobs,
                sizes.enqueue_batch,
                threads,
                f"enqueue, {sizes.enqueue_batch} per call",
                cpus.get("enqueue_batch"),
            ),
            "complete_b1": peer.complete(
                sizes.complete_b1, 1, threads, "complete, batch 1", cpus.get("complete_b1")
            ),
            "complete_b50": peer.complete(
                sizes.complete_b50,
                sizes.dequeue_batch,
                threads,
                f"complete, batch {sizes.dequeue_batch}",
                cpus.get("complete_b50"),
            ),
        }
    finally:
        peer.close()


def measure_river(
    binary: Path, sizes: Sizes, config: Config, cpus: dict[str, cpu.Window]
) -> dict[str, float]:
    """`river bench -n N` with N the jobs of the batch-50 completion row. Raises
    RiverUnavailableError (with the reason) when River does not run."""
    peer = river.River(binary, config.pg_dsn)
    print(f"River: `river bench -n {sizes.complete_b50}` in schema {peer.schema}", file=sys.stderr)
    try:
        peer.install()
        result = peer.bench(sizes.complete_b50, cpu.available())
    except (OSError, psycopg.Error) as exc:
        raise river.RiverUnavailableError(str(exc)) from exc
    finally:
        peer.close()
    if result.cpu is not None:
        cpus["complete_b50"] = result.cpu
    return {"complete_b50": result.rate}
