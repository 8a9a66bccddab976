"""`python -m bench`: start a `pinledger serve` on free ports with a fresh topic prefix
and schema, measure enqueue, completion, latency, replay and CPU per job, run the same
enqueue + complete workload on PgQueuer in the same Postgres and, where Go is installed,
River's own benchmark, and print one table.

    python -m bench            # the full run (a few minutes)
    python -m bench --quick    # about a minute
    python -m bench --quick --smoke   # tiny counts: does every part still run?
    python -m bench --peer pgqueuer   # PgQueuer only (River is built with Go on first use)
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
from importlib.metadata import version
from pathlib import Path

import psycopg

from bench import cpu, river, scale
from bench import pinledger_load as load
from bench.measure import (
    FULL,
    PHASES,
    QUICK,
    SMOKE,
    Sizes,
    measure_peer,
    measure_pinledger,
    measure_river,
    meter,
    windows,
)
from bench.metrics_page import counter_sum, metrics_page
from bench.table import Row, render
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.projections.dsn import is_mysql
from pinledger.projections.factory import open_store
from pinledger.service.config import Config
from pinledger.service.observability.catalogue import GROUP_REBALANCES_TOTAL as REBALANCES
from pinledger.service.observability.catalogue import OWNER_LEASE_LAPSES_TOTAL as LEASE_LAPSES
from pinledger.service.testing.servers import ServerProcess, running

ROOT = Path(__file__).resolve().parents[1]


# The peers, in the order of their columns.
PEERS = ("pgqueuer", "river")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about a minute)")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks it runs")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads/connections")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each queue")
    parser.add_argument(
        "--peer",
        action="append",
        metavar="NAMES",
        help="the peers to run, comma-separated, repeatable: pgqueuer, river (River's own "
        "`river bench`, built with Go on first use), none; default: pgqueuer, and river "
        "where Go is installed (the setup table says when River was skipped, and why)",
    )
    parser.add_argument("--no-peer", action="store_true", help="no peer (same as --peer none)")
    parser.add_argument(
        "--processes", type=int, default=1, help="server processes (serve --processes N)"
    )
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
    # Why a default peer was left out ({"river": reason}): shown in the setup table.
    args.skipped = {}
    if args.peer is None and not args.no_peer:
        names = list(PEERS)
        why = river.unavailable()
        if why is not None:
            names.remove("river")
            args.skipped["river"] = why
    else:
        names = [n.strip().lower() for given in args.peer or [] for n in given.split(",")]
    unknown = set(names) - {*PEERS, "none", ""}
    if unknown:
        parser.error(f"--peer: unknown {', '.join(sorted(unknown))} (known: {', '.join(PEERS)})")
    args.peers = [] if args.no_peer else [p for p in PEERS if p in names]
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
        # The store the server projects into: PINLEDGER_STORE_DSN
        # (docs/guides/mysql.md); Postgres otherwise. The peer always runs on Postgres.
        ("pinledger store", "MySQL (MariaDB)" if is_mysql(config.store_url) else "Postgres"),
        # The server's Log adapter: PINLEDGER_KAFKA_CLIENT (docs/reference/settings.md).
        ("pinledger kafka client", config.kafka_client),
        ("postgres", pg_version),
        ("postgres synchronous_commit", synchronous_commit),
        (
            "kafka-python / confluent-kafka / psycopg / thriftpy2",
            " / ".join(
                version(p) for p in ("kafka-python", "confluent-kafka", "psycopg", "thriftpy2")
            ),
        ),
        ("peer", peer_text(args.peers)),
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
        ("cpu per job", "from /proc, over each timed phase (docs/performance.md)"),
    ]


def peer_text(peers: list[str]) -> str:
    if not peers:
        return "none"
    names = {
        "pgqueuer": f"PgQueuer {version('pgqueuer')}",
        "river": f"River {river.VERSION} (`river bench`, {river.WORKERS:,} workers, "
        f"{river.go_version()})",
    }
    return "; ".join(names[p] for p in peers)


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


def rows(
    ours: dict[str, float], peers: list[dict[str, float]], sizes: Sizes, threads: int
) -> list[Row]:
    b = sizes.dequeue_batch

    def of(key: str) -> tuple[float | None, ...]:
        return tuple(peer.get(key) for peer in peers)

    return [
        Row(
            "enqueue, 1 job per call",
            ours["enqueue_single"],
            "jobs/s",
            ">= 3000",
            of("enqueue_single"),
        ),
        Row(
            f"enqueue, {sizes.enqueue_batch} jobs per call",
            ours["enqueue_batch"],
            "jobs/s",
            ">= 20000",
            of("enqueue_batch"),
        ),
        Row(
            "completed (dequeue + piggybacked ack), batch 1",
            ours["complete_b1"],
            "jobs/s",
            "",
            of("complete_b1"),
        ),
        Row(
            f"completed (dequeue + piggybacked ack), batch {b}",
            ours["complete_b50"],
            "jobs/s",
            ">= 15000",
            of("complete_b50"),
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


def pinledger_groups(server: int, bench: int, store_url: str) -> dict[str, cpu.Group]:
    """The processes whose CPU is pinledger's whole-system total: the server's tree,
    the load generator (this process's own threads), the projection store's database
    (Postgres, or MariaDB/MySQL on the MySQL store) and the Kafka broker."""
    database, ticks = cpu.store(is_mysql(store_url))
    return {
        "server": cpu.tree(server),
        "load generator (bench process)": cpu.alone(bench),
        database: ticks,
        "kafka (broker JVM)": cpu.kafka(),
    }


def bench_server(config: Config, name: str, partitions: int, processes: int = 1) -> ServerProcess:
    """A server on this machine's stack, with a fresh topic prefix and schema named
    `name` plus a random tag (`cleanup` removes both), on the configured store and Kafka
    client."""
    tag = uuid.uuid4().hex[:10]
    return ServerProcess(
        prefix=f"{name}{tag}.",
        schema=f"{name}_{tag}",
        settings={
            "PINLEDGER_KAFKA": config.kafka,
            "PINLEDGER_PG_DSN": config.pg_dsn,
            "PINLEDGER_STORE_DSN": config.store_url,
            "PINLEDGER_PARTITIONS": str(partitions),
            "PINLEDGER_PROCESSES": str(processes),
            "PINLEDGER_KAFKA_CLIENT": config.kafka_client,
        },
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scale:
        return scale_main(args)
    sizes = SMOKE if args.smoke else QUICK if args.quick else FULL
    config = Config.from_env()
    skipped: dict[str, str] = {}
    river_binary = prepare_river(args, skipped)
    setup = setup_rows(args, sizes, config)
    server = bench_server(config, "bench", args.partitions, args.processes)
    print(
        f"benchmark ({setup[0][1]}): server ({args.processes} process(es)) on port "
        f"{server.port}, topics {server.prefix}*, "
        f"schema {server.schema}",
        file=sys.stderr,
        flush=True,
    )
    systems: list[tuple[str, dict[str, cpu.Window]]] = []
    peers: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="pinledger-bench-") as logs:
            with running([server], Path(logs)):
                assert server.proc is not None
                ours_cpu = windows(
                    meter(pinledger_groups(server.proc.pid, os.getpid(), config.store_url))
                )
                systems.append(("pinledger", ours_cpu))
                before = metrics_page(server)
                with profiled(server.proc.pid, args.profile):
                    ours = measure_pinledger(server, args, sizes, config, ours_cpu)
                # Under full load no server may lose its partitions (issue 43): its lease
                # never lapses. Each queue a phase creates adds a rebalance by design.
                after = metrics_page(server)
                setup.append(
                    (
                        "owners' group",
                        f"{_grew(before, after, REBALANCES):.0f} rebalances while measured "
                        "(one per queue a phase creates), "
                        f"{_grew(before, after, LEASE_LAPSES):.0f} lease lapses (0 expected)",
                    )
                )
            replayed = load.replay_rate(
                config.kafka, config.store_url, server.prefix, server.schema, config.kafka_client
            )
            ours["replay"] = replayed.rate
            rebuilt = load.scratch_replay_rate(
                config.kafka, config.store_url, server.prefix, server.schema, config.kafka_client
            )
            ours["replay_scratch"] = rebuilt.rate
            if not (replayed.identical and rebuilt.identical):
                print("WARNING: the replay differs from the live projection", file=sys.stderr)
        if "pgqueuer" in args.peers:
            groups = {"PgQueuer + load generator (bench process)": cpu.alone(os.getpid())}
            peer_cpu = windows(meter({**groups, cpu.POSTGRES: cpu.postgres}))
            systems.append(("PgQueuer", peer_cpu))
            peers.append(measure_peer(args, sizes, config, peer_cpu))
        if "river" in args.peers:
            river_cpu: dict[str, cpu.Window] = {}
            systems.append(("River", river_cpu))
            peers.append(run_river(river_binary, sizes, config, river_cpu, skipped))
    finally:
        cleanup(config, server)
    setup = note_skipped(setup, skipped)
    names = {"pgqueuer": "PgQueuer", "river": "River bench"}
    table = render(
        setup,
        rows(ours, peers, sizes, args.concurrency),
        [names[p] for p in args.peers],
        cpu.table_rows(systems, [key for key, _ in PHASES]),
        [label for _, label in PHASES],
        cpu.ratio_rows(systems, [key for key, _ in PHASES]),
    )
    print()
    print(table, flush=True)
    return 0


def _grew(before: str, after: str, counter: str) -> float:
    return counter_sum(after, counter) - counter_sum(before, counter)


def note_skipped(setup: list[tuple[str, str]], skipped: dict[str, str]) -> list[tuple[str, str]]:
    """The setup rows with the peer row saying which peer was skipped, and why."""
    if "river" not in skipped:
        return setup
    return [(k, f"{v}; River skipped: {skipped['river']}" if k == "peer" else v) for k, v in setup]


def prepare_river(args: argparse.Namespace, skipped: dict[str, str]) -> Path | None:
    """River's binary, built before anything is timed (a Go build would disturb the
    figures); None, with the reason in `skipped` and on stderr, when it cannot be had
    (or a default run left it out: no Go)."""
    if "river" in args.skipped:
        _skip(skipped, args.skipped["river"])
        return None
    if "river" not in args.peers:
        return None
    try:
        return river.prepare()
    except river.RiverUnavailableError as exc:
        _skip(skipped, str(exc))
        return None


def _skip(skipped: dict[str, str], why: str) -> None:
    skipped["river"] = why
    print(f"River skipped: {why}", file=sys.stderr, flush=True)


def run_river(
    binary: Path | None,
    sizes: Sizes,
    config: Config,
    cpus: dict[str, cpu.Window],
    skipped: dict[str, str],
) -> dict[str, float]:
    """River's figures; {} when it was not built or does not run (the run goes on)."""
    if binary is None:
        return {}
    try:
        return measure_river(binary, sizes, config, cpus)
    except river.RiverUnavailableError as exc:
        _skip(skipped, str(exc))
        return {}


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
