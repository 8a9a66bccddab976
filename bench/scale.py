"""`python -m bench --scale [--jobs N]`: a backlog of N jobs of 512 B (default 2,000,000)
enqueued through the API into one server, then: server RSS along the way, Postgres
bytes per job, dequeue latency at the full backlog and on a small queue, takeover
after a SIGKILL at the full backlog (a second server adopts every partition), and
completed jobs/s while draining to empty. Every job must end SUCCEEDED and a replay of
the log must equal the live projection (docs/decisions/0014-ready-window.md)."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import pinledger_load as load
from bench.stats import Counter, Progress, percentile
from bench.storage import _bytes
from pinledger.idl import pinlater
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, connect

BODY = b"x" * 512
PER_CALL = 1000
# A short session so that the takeover does not wait the default 10 s for the group
# to notice the killed server (the figure reported is from the kill, timeout included).
SESSION_TIMEOUT_MS = 6000
LATENCY_SAMPLES = 1000


class Figures(list[tuple[str, str]]):
    """The figures, each also printed (stderr) as soon as it is measured: a long run
    interrupted late still leaves what it measured."""

    def append(self, figure: tuple[str, str]) -> None:
        super().append(figure)
        print(f"\n= {figure[0]}: {figure[1]}", file=sys.stderr, flush=True)


def rss_mib(server: ServerProcess) -> float:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _ack(client: Any, queue: str, descriptors: list[str]) -> None:
    if descriptors:
        client.ackDequeuedJobs(load.context(), load._ack(queue, descriptors))


def enqueue(
    server: ServerProcess, queue: str, jobs: int, threads: int, sample: Callable[[], None]
) -> float:
    calls = load._split(max(1, jobs // PER_CALL), threads)
    done = Counter()
    request = pinlater.PinLaterEnqueueRequest(
        queueName=queue, jobs=[pinlater.PinLaterJob(body=BODY) for _ in range(PER_CALL)]
    )

    def work(index: int) -> None:
        client = connect(server.port)
        try:
            for i in range(calls[index]):
                client.enqueueJobs(load.context(), request)
                done.add(PER_CALL)
                if index == 0 and i % 20 == 0:
                    sample()
        finally:
            client.close()

    with Progress("enqueue 512 B jobs", sum(calls) * PER_CALL, done.get):
        seconds = load._run_threads(threads, work)
    return done.get() / seconds


def wait_projected(
    server: ServerProcess, queue: str, jobs: int, sample: Callable[[], None]
) -> float:
    started = time.monotonic()
    seen = Counter()
    with Progress("projected", jobs, seen.get):
        while seen.get() < jobs:
            time.sleep(0.5)
            sample()
            # The count waits for the projection; far behind, it fails: ask again later.
            with contextlib.suppress(pinlater.PinLaterException):
                seen.value = load.pending(server.port, queue)
    return time.monotonic() - started


def dequeue_latency(server: ServerProcess, queue: str, samples: int) -> list[float]:
    """One client dequeuing 1 job at a time (acked 100 at a time, untimed)."""
    client = connect(server.port)
    latencies: list[float] = []
    held: list[str] = []
    try:
        while len(latencies) < samples:
            request = pinlater.PinLaterDequeueRequest(queueName=queue, limit=1)
            started = time.perf_counter()
            answer = client.dequeueJobs(load.context(), request)
            took = (time.perf_counter() - started) * 1000
            got = list(answer.jobs or ())
            if got:
                latencies.append(took)
                held += got
            if len(held) >= 100:
                _ack(client, queue, held)
                held = []
        _ack(client, queue, held)
    finally:
        client.close()
    return latencies


def first_job_after(server: ServerProcess, queue: str, since: float, timeout: float = 120) -> float:
    client: Any = None
    deadline = since + timeout
    while time.monotonic() < deadline:
        try:
            if client is None:
                client = connect(server.port, timeout_ms=5000)
            answer = client.dequeueJobs(
                load.context(), pinlater.PinLaterDequeueRequest(queueName=queue, limit=1)
            )
            got = list(answer.jobs or ())
            if got:
                seconds = time.monotonic() - since
                _ack(client, queue, got)
                client.close()
                return seconds
        except Exception:
            client = None
        time.sleep(0.01)
    raise RuntimeError(f"no job served within {timeout}s of the kill")


def drain(
    server: ServerProcess, queue: str, threads: int, sample: Callable[[], None]
) -> tuple[int, float]:
    """Workers dequeue 100 at a time, piggybacking the previous batch's acks, until the
    queue has no pending job left; returns (jobs completed, seconds)."""
    completed = Counter()
    empty = Counter()

    def work(index: int) -> None:
        client = connect(server.port)
        held: list[str] = []
        idle = 0
        try:
            while True:
                acks = load._ack(queue, held) if held else None
                answer = client.dequeueJobs(
                    load.context(),
                    pinlater.PinLaterDequeueRequest(queueName=queue, limit=100, jobAckRequest=acks),
                )
                completed.add(len(held))
                held = list(answer.jobs or ())
                if index == 0 and completed.get() % 20_000 < 100:
                    sample()
                if held:
                    idle = 0
                    continue
                idle += 1
                if idle >= 50 and load.pending(server.port, queue) == 0:
                    empty.add(1)
                    return
                time.sleep(0.02)
        finally:
            client.close()

    with Progress("drain", 0, completed.get):
        seconds = load._run_threads(threads, work)
    return completed.get(), seconds


def succeeded(server: ServerProcess, queue: str) -> int:
    client = connect(server.port)
    try:
        count: int = client.getJobCount(
            load.context(),
            pinlater.PinLaterGetJobCountRequest(
                queueName=queue, jobState=pinlater.PinLaterJobState.SUCCEEDED
            ),
        )
        return count
    finally:
        client.close()


def run(
    jobs: int,
    partitions: int,
    threads: int,
    config: Config,
    cleanup: Callable[[Config, ServerProcess], None],
) -> list[tuple[str, str]]:
    tag = uuid.uuid4().hex[:10]
    settings = {
        "PINLEDGER_KAFKA": config.kafka,
        "PINLEDGER_PG_DSN": config.pg_dsn,
        "PINLEDGER_PARTITIONS": str(partitions),
        "PINLEDGER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
    }
    first = ServerProcess(prefix=f"bench{tag}.", schema=f"bench_{tag}", settings=settings)
    second = ServerProcess(prefix=first.prefix, schema=first.schema, settings=settings)
    out = Figures()
    out.append(
        ("jobs", f"{jobs:,} of {len(BODY)} B, {partitions} partitions, {threads} client threads")
    )
    out.append(
        ("window (PINLEDGER_READY_WINDOW)", f"{Config().ready_window} per partition (default)")
    )
    peak = [0.0]
    try:
        with tempfile.TemporaryDirectory(prefix="pinledger-scale-") as logs:
            first.start(Path(logs))

            def sample_first() -> None:
                peak[0] = max(peak[0], rss_mib(first))

            out.append(("server RSS, started", f"{rss_mib(first):.0f} MiB"))
            small = load.create_queue(first.port)
            queue = load.create_queue(first.port)
            load.prefill(first.port, small, 2000, "small queue")
            quiet = dequeue_latency(first, small, LATENCY_SAMPLES)
            rate = enqueue(first, queue, jobs, threads, sample_first)
            out.append(("enqueue", f"{rate:,.0f} jobs/s"))
            lag = wait_projected(first, queue, jobs, sample_first)
            out.append(("projection caught up after the enqueue", f"{lag:.1f} s"))
            out.append(("server RSS, full backlog", f"{rss_mib(first):.0f} MiB"))
            out.append(("server RSS, peak while enqueuing", f"{peak[0]:.0f} MiB"))
            store = Store(config.pg_dsn, first.schema)
            try:
                for table in ("jobs", "job_events"):
                    out.append(
                        (f"Postgres {table}", f"{_bytes(store, table, False) / jobs:.0f} B/job")
                    )
            finally:
                store.close()
            loaded = dequeue_latency(first, queue, LATENCY_SAMPLES)
            out.append(
                (
                    "dequeue p50 / p99, small queue (2,000 jobs)",
                    f"{percentile(quiet, 0.5):.2f} / {percentile(quiet, 0.99):.2f} ms",
                )
            )
            out.append(
                (
                    f"dequeue p50 / p99, {jobs:,} pending",
                    f"{percentile(loaded, 0.5):.2f} / {percentile(loaded, 0.99):.2f} ms",
                )
            )
            _takeover_and_drain(first, second, queue, jobs, threads, Path(logs), out)
            second.stop()
        replayed = load.replay_rate(
            config.kafka, config.pg_dsn, first.prefix, first.schema, config.kafka_client
        )
        out.append(("replay identical to the live projection", str(replayed.identical)))
    finally:
        second.stop()
        first.stop()
        cleanup(config, first)
    return out


def _takeover_and_drain(
    first: ServerProcess,
    second: ServerProcess,
    queue: str,
    jobs: int,
    threads: int,
    logs: Path,
    out: list[tuple[str, str]],
) -> None:
    """SIGKILL the first server at the full backlog, start the second, time its first
    job, then drain the queue through it."""
    killed = time.monotonic()
    first.kill()
    second.start(logs)
    took = first_job_after(second, queue, killed)
    out.append(
        (
            "takeover: SIGKILL to first job served by the new server",
            f"{took:.1f} s (session timeout {SESSION_TIMEOUT_MS / 1000:.0f} s included)",
        )
    )
    adoption = _adoption_seconds(second.log())
    if adoption is not None:
        out.append(("takeover: partitions assigned to all serving", f"{adoption:.2f} s"))
    out.append(("new server RSS after takeover", f"{rss_mib(second):.0f} MiB"))
    peak_second = [0.0]

    def sample_second() -> None:
        peak_second[0] = max(peak_second[0], rss_mib(second))

    done, seconds = drain(second, queue, threads, sample_second)
    out.append(("drain: completed", f"{done / seconds:,.0f} jobs/s ({done:,} jobs)"))
    out.append(("new server RSS, peak while draining", f"{peak_second[0]:.0f} MiB"))
    finished = succeeded(second, queue)
    out.append(("jobs SUCCEEDED at the end", f"{finished:,} of {jobs:,}"))


def _adoption_seconds(log_text: str) -> float | None:
    """From the new server's log: its first "owning" line to its last "serving" line."""

    def stamp(line: str) -> float:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()

    lines = log_text.splitlines()
    owning = [stamp(line) for line in lines if " owning " in line and "q." in line]
    serving = [stamp(line) for line in lines if " serving " in line and "q." in line]
    if not owning or not serving:
        return None
    return max(serving) - min(owning)
