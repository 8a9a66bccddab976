"""`python -m bench.sizing`: what a job costs to keep, measured through a real server,
for docs/deploying.md's sizing section. A measurement, not a test: run it once, on a
quiet machine, and write down the machine with the figures.

    python -m bench.sizing [--jobs 20000] [--bodies 100,1024] [--no-mysql]

For each body size and call shape ("batched": 100 jobs per enqueue call on 4 threads,
dequeues of 50 with the previous call's acks piggybacked on 4 threads, as the Python
`Worker` does; "single": 1 job per call and dequeues of 1 on 8 threads), a fresh
`pinledger serve` (default settings: 4 partitions, librdkafka, group commit, sticky
partitions) on its own topic prefix and schema gets N jobs, and then every job is
dequeued and acked. Measured:

- Kafka: the queue topic's bytes on the broker's disk (DescribeLogDirs: the sum of its
  log segments, one replica), after the enqueues and after the acks, per job; the
  records are then read back and each record's bytes attributed to its events (in
  proportion to each event's encoded size) to split the whole life into enqueue, claim
  and ack.
- The store: each table's data and index bytes (Postgres: pg_table_size and
  pg_indexes_size over the partition tree; MariaDB: information_schema after ANALYZE
  TABLE) with N jobs PENDING, and with N jobs SUCCEEDED (finished, before GC), per job.
  Postgres with both shapes, MariaDB with the batched one (`--no-mysql`: skip it).
- Memory: one server's RSS with no queue, with `--queues` empty queues of 4 partitions
  (all owned by it), and after `--fill-queues` of them were given more jobs of
  `--memory-body` bytes than their ready windows hold, at every priority
  (PINLEDGER_READY_WINDOW, default 3000 per partition, split between the priorities):
  RSS per empty partition and per partition holding a full window.

Everything it creates (topics, schemas) is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient

from bench import pinledger_load as load
from bench.scale import rss_mib
from bench.stats import Counter, Progress
from pinledger.idl import pinlater
from pinledger.ledger import codec
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Position, queue_topic
from pinledger.projections.dsn import is_mysql
from pinledger.projections.factory import open_store
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, connect

MYSQL_DEFAULT_DSN = "mysql://pinledger:pinledger@127.0.0.1:33069/pinledger"
TABLES = ("jobs", "job_events")
SOURCE = "worker:host-1.example.internal"


@dataclass(frozen=True)
class Shape:
    name: str
    enqueue_per_call: int
    enqueue_threads: int
    dequeue_limit: int
    dequeue_threads: int


SHAPES = {
    "batched": Shape("batched", 100, 4, 50, 4),
    "single": Shape("single", 1, 8, 1, 8),
}


def _context() -> Any:
    # A request id per call, 32 hex characters, as real clients send.
    return pinlater.RequestContext(source=SOURCE, requestId=uuid.uuid4().hex)


@dataclass
class StoreBytes:
    data: dict[str, int] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)
    schema_total: int = 0


@dataclass
class Scenario:
    store: str
    shape: Shape
    body: int
    jobs: int
    kafka_enqueued: int = 0
    kafka_total: int = 0
    records_enqueued: int = 0
    records_total: int = 0
    by_event: dict[str, float] = field(default_factory=dict)
    pending: StoreBytes = field(default_factory=StoreBytes)
    finished: StoreBytes = field(default_factory=StoreBytes)


# ---------------------------------------------------------------- Kafka


def topic_bytes(bootstrap: str, topic: str) -> int:
    """The topic's bytes on the brokers' disks (every partition, every replica: the
    stack has one), as DescribeLogDirs reports them."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="pinledger-sizing")
    try:
        total = 0
        for broker in admin.describe_log_dirs([topic]):
            for log_dir in broker["log_dirs"]:
                for named in log_dir["topics"]:
                    if named["name"] == topic:
                        total += sum(p["partition_size"] for p in named["partitions"])
        return total
    finally:
        admin.close()


def read_records(bootstrap: str, topic: str) -> Iterator[tuple[int, list[Any]]]:
    """Each record of the topic: its value and header bytes, and its events."""
    log = KafkaLog(KafkaSettings(bootstrap=bootstrap, client_id="pinledger-sizing"))
    try:
        partitions = log.partition_count(topic) or 0
        ends = log.end_offsets([(topic, p) for p in range(partitions)])
        left = sum(ends.values())
        reader = log.reader([Position(topic, p, 0) for p in range(partitions)])
        try:
            while left > 0:
                for record in reader.poll(5000, 1000):
                    left -= 1
                    size = len(record.value) + sum(len(k) + len(v) for k, v in record.headers)
                    yield size, codec.record_events(record.value, record.headers)
        finally:
            reader.close()
    finally:
        log.close()


def split_by_event(bootstrap: str, topic: str, on_disk: int) -> tuple[int, dict[str, float]]:
    """Records read back, and the bytes on disk attributed to each event type: a
    record's framing on disk (what the broker holds beyond the values and headers,
    spread evenly over the records) and its value, over its events in proportion to
    their encoded sizes."""
    records: list[tuple[int, list[Any]]] = list(read_records(bootstrap, topic))
    payload = sum(size for size, _ in records)
    framing = (on_disk - payload) / max(1, len(records))
    by_event: dict[str, float] = defaultdict(float)
    for size, events in records:
        sizes = codec.event_sizes(events)
        whole = sum(sizes) or 1
        for event, part in zip(events, sizes, strict=True):
            by_event[type(event).__name__] += (size + framing) * part / whole
    return len(records), dict(by_event)


def end_records(bootstrap: str, topic: str) -> int:
    log = KafkaLog(KafkaSettings(bootstrap=bootstrap, client_id="pinledger-sizing"))
    try:
        partitions = log.partition_count(topic) or 0
        return sum(log.end_offsets([(topic, p) for p in range(partitions)]).values())
    finally:
        log.close()


# ---------------------------------------------------------------- the store


def store_bytes(dsn: str, schema: str) -> StoreBytes:
    store: Any = open_store(dsn, schema, max_size=1)
    out = StoreBytes()
    try:
        with store.dialect.session("measuring table sizes") as session:
            if is_mysql(dsn):
                for table in TABLES:
                    session.fetchall("analyze_table", {}, table=table)
            for table, data, index in session.fetchall("schema_table_bytes", {}):
                out.schema_total += int(data) + int(index)
                if table in TABLES:
                    out.data[table], out.index[table] = int(data), int(index)
    finally:
        store.close()
    return out


# ---------------------------------------------------------------- load


def _count(port: int, queue: str, state: Any) -> int:
    client = connect(port)
    try:
        count: int = client.getJobCount(
            _context(), pinlater.PinLaterGetJobCountRequest(queueName=queue, jobState=state)
        )
        return count
    finally:
        client.close()


def wait_count(port: int, queue: str, state: Any, jobs: int, label: str) -> None:
    seen = Counter()
    deadline = time.monotonic() + 600
    with Progress(label, jobs, seen.get):
        while seen.get() < jobs:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{queue}: {jobs} jobs not {label} within 600 s")
            time.sleep(0.5)
            # A count waits for the projection; far behind, it fails: ask again.
            with contextlib.suppress(pinlater.PinLaterException):
                seen.value = _count(port, queue, state)


def enqueue(
    port: int, queue: str, jobs: int, body: int, per_call: int, threads: int, priorities: int = 1
) -> None:
    """`jobs` jobs of `body` bytes, `per_call` per call on `threads` threads; with
    `priorities` > 1 a call's jobs take each priority in turn (a call's jobs go to one
    partition, so every partition gets every priority)."""
    calls = load._split(max(1, jobs // per_call), threads)
    done = Counter()
    payload = b"x" * body
    request = pinlater.PinLaterEnqueueRequest(
        queueName=queue,
        jobs=[
            pinlater.PinLaterJob(body=payload, priority=1 + k % priorities) for k in range(per_call)
        ],
    )

    def work(index: int) -> None:
        client = connect(port)
        try:
            for _ in range(calls[index]):
                client.enqueueJobs(_context(), request)
                done.add(per_call)
        finally:
            client.close()

    with Progress(f"enqueue {body} B", sum(calls) * per_call, done.get):
        load._run_threads(threads, work)


def complete(port: int, queue: str, jobs: int, limit: int, threads: int) -> None:
    """Dequeue `limit` at a time on `threads` threads, each call acking the previous
    call's jobs, until every job was dequeued; each thread acks its last ones alone."""
    dequeued = Counter()
    acked = Counter()

    def work(index: int) -> None:
        client = connect(port)
        held: list[str] = []
        idle_since: float | None = None
        try:
            while dequeued.get() < jobs:
                acks = load._ack(queue, held) if held else None
                answer = client.dequeueJobs(
                    _context(),
                    pinlater.PinLaterDequeueRequest(
                        queueName=queue, limit=limit, jobAckRequest=acks
                    ),
                )
                acked.add(len(held))
                held = list(answer.jobs or ())
                dequeued.add(len(held))
                if held:
                    idle_since = None
                    continue
                now = time.monotonic()
                idle_since = idle_since or now
                if now - idle_since > 60:
                    raise RuntimeError(f"{queue}: nothing to dequeue for 60 s")
                time.sleep(0.005)
        finally:
            if held:
                client.ackDequeuedJobs(_context(), load._ack(queue, held))
                acked.add(len(held))
            client.close()

    with Progress("dequeue and ack", jobs, acked.get):
        load._run_threads(threads, work)


# ---------------------------------------------------------------- runs


@contextlib.contextmanager
def made(config: Config, dsn: str) -> Iterator[tuple[str, str]]:
    """A fresh topic prefix and schema, removed at the end."""
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"sizing{tag}.", f"sizing_{tag}"
    try:
        yield prefix, schema
    finally:
        remove(config, dsn, prefix, schema)


@contextlib.contextmanager
def running(
    config: Config, dsn: str, logs: Path, prefix: str, schema: str, **settings: str
) -> Iterator[ServerProcess]:
    """A `pinledger serve` on the prefix and schema, stopped (SIGTERM) at the end."""
    process = ServerProcess(
        prefix=prefix,
        schema=schema,
        settings={
            "PINLEDGER_KAFKA": config.kafka,
            "PINLEDGER_STORE_DSN": dsn,
            # As long as a pod's (<hostname>:<pid>): it is in every record's actor.
            "PINLEDGER_SERVER_ID": f"pinledger-{uuid.uuid4().hex[:9]}-x2x7k:1",
            **settings,
        },
    )
    try:
        process.start(logs)
        yield process
    finally:
        process.stop()


def remove(config: Config, dsn: str, prefix: str, schema: str) -> None:
    log = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id="pinledger-sizing"))
    try:
        for topic in log.topics():
            if topic.startswith(prefix):
                log.delete_topic(topic)
    finally:
        log.close()
    open_store(dsn, schema).drop()


def run_scenario(
    config: Config, dsn: str, store: str, shape: Shape, body: int, jobs: int, logs: Path
) -> Scenario:
    print(f"\n{store}, {shape.name}, {body} B bodies, {jobs:,} jobs", file=sys.stderr)
    out = Scenario(store, shape, body, jobs)
    with made(config, dsn) as names, running(config, dsn, logs, *names) as proc:
        queue = load.create_queue(proc.port)
        topic = queue_topic(proc.prefix, queue)
        enqueue(proc.port, queue, jobs, body, shape.enqueue_per_call, shape.enqueue_threads)
        wait_count(proc.port, queue, pinlater.PinLaterJobState.PENDING, jobs, "projected")
        out.kafka_enqueued = topic_bytes(config.kafka, topic)
        out.records_enqueued = end_records(config.kafka, topic)
        out.pending = store_bytes(dsn, proc.schema)
        complete(proc.port, queue, jobs, shape.dequeue_limit, shape.dequeue_threads)
        wait_count(proc.port, queue, pinlater.PinLaterJobState.SUCCEEDED, jobs, "succeeded")
        out.kafka_total = topic_bytes(config.kafka, topic)
        out.records_total, out.by_event = split_by_event(config.kafka, topic, out.kafka_total)
        out.finished = store_bytes(dsn, proc.schema)
    report([out], None, lambda line: print(line, file=sys.stderr))
    return out


def _metric(proc: ServerProcess, name: str) -> float:
    with proc.admin_get("/metrics") as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0  # not set yet: the owner has not refilled a window


def _settled_rss(proc: ServerProcess, seconds: float = 5.0) -> float:
    """The RSS after `seconds` of quiet, the largest of five samples a second apart."""
    time.sleep(seconds)
    samples = []
    for _ in range(5):
        samples.append(rss_mib(proc))
        time.sleep(1)
    return max(samples)


@dataclass
class Memory:
    partitions: int
    filled: int
    window: int
    body: int
    held: float
    rss_none: float
    rss_empty: float
    rss_loader: float
    rss_full: float

    def lines(self) -> list[str]:
        per_empty = (self.rss_empty - self.rss_none) * 1024 / self.partitions
        grown = self.rss_full - self.rss_empty
        per_job = grown * 1024 * 1024 / max(1.0, self.held)
        return [
            f"server RSS, no queue: {self.rss_none:.0f} MiB",
            f"the same server owning {self.partitions} empty partitions: "
            f"{self.rss_empty:.0f} MiB ({per_empty:.0f} KiB per partition)",
            f"the same server after enqueuing into {self.filled} of them (the burst's "
            f"batches folded, not the windows): {self.rss_loader:.0f} MiB",
            f"a new server taking over all {self.partitions}, {self.filled} of them with "
            f"more jobs than their windows hold ({self.held:,.0f} jobs of {self.body} B "
            f"held, window {self.window}): {self.rss_full:.0f} MiB, "
            f"{grown * 1024 / self.filled:,.0f} KiB per full partition over the empty ones, "
            f"{per_job:,.0f} B per job held",
        ]


def run_memory(
    config: Config, dsn: str, queues: int, fill_queues: int, body: int, window: int, logs: Path
) -> Memory:
    """One server: RSS with no queue, then owning `queues` empty queues; it enqueues
    twice what `fill_queues` queues' windows hold and stops. A second server takes
    every partition over and loads their windows from the store (as after a failover
    or a restart): its RSS, without the burst the first one projected."""
    print(
        f"\nmemory: {queues} queues of {config.partitions} partitions, {fill_queues} filled",
        file=sys.stderr,
    )
    settings = {"PINLEDGER_READY_WINDOW": str(window)}
    filled = fill_queues * config.partitions
    with made(config, dsn) as names:
        with running(config, dsn, logs, *names, **settings) as first:
            rss_none = _settled_rss(first)
            queue_names = []
            for i in range(queues):
                print(f"  createQueue {i + 1}/{queues}", file=sys.stderr)
                queue_names.append(load.create_queue(first.port))
            rss_empty = _settled_rss(first)
            # Twice what the windows hold, in calls of 100 cycling through the
            # priorities: sticky partitions spread calls over partitions by time.
            per_queue = -(-window * config.partitions * 2 // 100) * 100
            for name in queue_names[:fill_queues]:
                enqueue(first.port, name, per_queue, body, 100, 4, config.max_priority)
                wait_count(
                    first.port, name, pinlater.PinLaterJobState.PENDING, per_queue, "projected"
                )
            rss_loader = _settled_rss(first)
        with running(config, dsn, logs, *names, **settings) as second:
            deadline = time.monotonic() + 60
            wanted = window * filled
            while (
                _metric(second, "pinledger_ready_jobs_held") < wanted
                and time.monotonic() < deadline
            ):
                time.sleep(1)
            held = _metric(second, "pinledger_ready_jobs_held")
            rss_full = _settled_rss(second)
    memory = Memory(
        queues * config.partitions,
        filled,
        window,
        body,
        held,
        rss_none,
        rss_empty,
        rss_loader,
        rss_full,
    )
    for line in memory.lines():
        print(line, file=sys.stderr)
    return memory


# ---------------------------------------------------------------- report


def _kib(value: float) -> str:
    return f"{value:,.0f}"


def report(scenarios: list[Scenario], memory: Memory | None, out: Callable[[str], None]) -> None:
    if scenarios:
        _report_scenarios(scenarios, out)
    if memory is not None:
        out("")
        out("Memory (one server owning every partition)")
        for line in memory.lines():
            out(line)


def _report_scenarios(scenarios: list[Scenario], out: Callable[[str], None]) -> None:
    out("Kafka, bytes on disk per job (one replica; multiply by the replication factor)")
    out(
        "store     shape    body  after enqueue  whole life  records/job  "
        "enqueue  claim  ack   (whole life by event)"
    )
    for s in scenarios:
        n = s.jobs
        enq, claim, ack = (s.by_event.get(e, 0) / n for e in ("Enqueued", "Claimed", "Succeeded"))
        out(
            f"{s.store:<9} {s.shape.name:<8} {s.body:>4}  {s.kafka_enqueued / n:>13,.0f}  "
            f"{s.kafka_total / n:>10,.0f}  {s.records_total / n:>11.3f}  "
            f"{enq:>7,.0f}  {claim:>5,.0f}  {ack:>4,.0f}   "
            f"(enqueue records/job {s.records_enqueued / n:.3f})"
        )
    out("")
    out("Store, bytes per job (data + indexes), N jobs PENDING, then N jobs SUCCEEDED before GC")
    out("store     shape    body  state      jobs data+idx      job_events data+idx   schema total")
    for s in scenarios:
        for state, sizes in (("PENDING", s.pending), ("SUCCEEDED", s.finished)):
            n = s.jobs
            cells = [
                f"{sizes.data.get(t, 0) / n:,.0f}+{sizes.index.get(t, 0) / n:,.0f}" for t in TABLES
            ]
            out(
                f"{s.store:<9} {s.shape.name:<8} {s.body:>4}  {state:<9}  {cells[0]:>17}  "
                f"{cells[1]:>21}  {sizes.schema_total / n:>12,.0f}"
            )


def _terminated(signum: int, frame: Any) -> None:
    # SIGTERM (a `timeout`, a kill): stop the servers and remove what was made.
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _terminated)
    parser = argparse.ArgumentParser(prog="python -m bench.sizing", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per scenario")
    parser.add_argument("--bodies", default="100,1024", help="body sizes in bytes")
    parser.add_argument("--shapes", default="batched,single", help="call shapes on Postgres")
    parser.add_argument("--no-mysql", action="store_true", help="skip the MariaDB runs")
    parser.add_argument(
        "--mysql-dsn", default=None, help="default: $PINLEDGER_MYSQL_DSN or the stack's"
    )
    parser.add_argument("--queues", type=int, default=16, help="empty queues for memory")
    parser.add_argument("--fill-queues", type=int, default=2, help="queues given full windows")
    parser.add_argument("--memory-body", type=int, default=512)
    parser.add_argument(
        "--window", type=int, default=Config().ready_window, help="PINLEDGER_READY_WINDOW"
    )
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-only", action="store_true")
    args = parser.parse_args()
    config = Config.from_env()
    mysql_dsn = args.mysql_dsn or os.environ.get("PINLEDGER_MYSQL_DSN") or MYSQL_DEFAULT_DSN
    bodies = [int(b) for b in args.bodies.split(",")]
    shapes = [] if args.memory_only else [SHAPES[s] for s in args.shapes.split(",")]
    scenarios: list[Scenario] = []
    memory: Memory | None = None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pinledger-sizing-") as tmp:
        logs = Path(tmp)
        for shape in shapes:
            for body in bodies:
                scenarios.append(
                    run_scenario(config, config.pg_dsn, "postgres", shape, body, args.jobs, logs)
                )
        if not args.no_mysql and not args.memory_only:
            for body in bodies:
                scenarios.append(
                    run_scenario(
                        config, mysql_dsn, "mariadb", SHAPES["batched"], body, args.jobs, logs
                    )
                )
        if not args.no_memory:
            memory = run_memory(
                config,
                config.pg_dsn,
                args.queues,
                args.fill_queues,
                args.memory_body,
                args.window,
                logs,
            )
    print()
    print(
        f"python -m bench.sizing --jobs {args.jobs}: {time.monotonic() - started:.0f} s; "
        f"Kafka {config.kafka}, client {config.kafka_client}; shapes: "
        + "; ".join(
            f"{s.name}: {s.enqueue_per_call}/enqueue call x {s.enqueue_threads} threads, "
            f"dequeue {s.dequeue_limit} + piggybacked acks x {s.dequeue_threads} threads"
            for s in shapes
        )
    )
    report(scenarios, memory, print)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
