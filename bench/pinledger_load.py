"""The pinledger side of the benchmark: raw thriftpy2 clients (Cython framed binary
transport, one connection per thread) against one `pinledger serve` process."""

from __future__ import annotations

import functools
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.cpu import Window
from bench.stats import Counter, Progress
from pinledger.idl import pinlater
from pinledger.ledger.adapters import open_log
from pinledger.ledger.kafka import KafkaSettings
from pinledger.ledger.log import Log
from pinledger.projections.factory import open_store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.projections.store import LedgerStore
from pinledger.projections.verify import verify
from pinledger.service.testing.servers import connect

BODY = b'{"task":"noop"}'


def context() -> Any:
    return pinlater.RequestContext(source="bench:host", requestId="bench")


@dataclass
class CompleteResult:
    completed: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.completed / self.seconds


def create_queue(port: int) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    client = connect(port)
    try:
        client.createQueue(context(), name)
    finally:
        client.close()
    return name


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _run_threads(threads: int, work: Callable[[int], None], cpu: Window | None = None) -> float:
    """Run `work(index)` on `threads` threads started together; returns the seconds
    from the common start to the last one's end, over which `cpu` samples. A thread's
    error is re-raised."""
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        barrier.wait()
        try:
            work(index)
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    if cpu is not None:
        cpu.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in pool:
        thread.join()
    seconds = time.perf_counter() - started
    if cpu is not None:
        cpu.stop()
    if errors:
        raise errors[0]
    return seconds


def enqueue(
    port: int,
    queue: str,
    jobs: int,
    per_call: int,
    threads: int,
    label: str,
    cpu: Window | None = None,
) -> float:
    """Enqueue `jobs` no-op jobs, `per_call` per enqueueJobs call; returns jobs/s
    (and the CPU the phase cost, into `cpu`)."""
    calls = _split(max(1, jobs // per_call), threads)
    done = Counter()
    request = pinlater.PinLaterEnqueueRequest(
        queueName=queue, jobs=[pinlater.PinLaterJob(body=BODY) for _ in range(per_call)]
    )

    def work(index: int) -> None:
        client = connect(port)
        try:
            for _ in range(calls[index]):
                client.enqueueJobs(context(), request)
                done.add(per_call)
        finally:
            client.close()

    with Progress(label, sum(calls) * per_call, done.get):
        seconds = _run_threads(threads, work, cpu)
    if cpu is not None:
        cpu.jobs = done.get()
    return done.get() / seconds


def pending(port: int, queue: str) -> int:
    client = connect(port)
    try:
        count: int = client.getJobCount(
            context(),
            pinlater.PinLaterGetJobCountRequest(
                queueName=queue, jobState=pinlater.PinLaterJobState.PENDING
            ),
        )
        return count
    finally:
        client.close()


def prefill(port: int, queue: str, jobs: int, label: str, timeout: float = 300) -> None:
    """Enqueue `jobs` and wait until the projection counts them all pending, so the
    measure that follows is dequeue + ack alone."""
    enqueue(port, queue, jobs, min(1000, jobs), 2, f"{label} (prefill)")
    deadline = time.monotonic() + timeout
    projected = Counter()
    with Progress(f"{label} (prefill projected)", jobs, projected.get):
        while projected.get() < jobs:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{queue}: {jobs} jobs not projected within {timeout}s")
            time.sleep(0.2)
            projected.value = pending(port, queue)


def _ack(queue: str, descriptors: list[str]) -> Any:
    return pinlater.PinLaterJobAckRequest(
        queueName=queue,
        jobsSucceeded=[pinlater.PinLaterJobAckInfo(jobDescriptor=d) for d in descriptors],
    )


def complete(
    port: int,
    queue: str,
    jobs: int,
    batch: int,
    threads: int,
    label: str,
    piggyback: bool = True,
    cpu: Window | None = None,
) -> CompleteResult:
    """Dequeue `batch` at a time, each call acking the previous call's jobs (no-op
    jobs: PinLater's piggybacked acks); returns completed (acked) jobs/s and each
    dequeue call's latency. Without `piggyback`, dequeues carry no acks (a dequeue's
    own latency) and the jobs are acked 100 at a time between timed calls."""
    prefill(port, queue, jobs, label)
    dequeued = Counter()
    completed = Counter()
    latencies: list[list[float]] = [[] for _ in range(threads)]

    def work(index: int) -> None:
        client = connect(port)
        held: list[str] = []
        empty_since: float | None = None
        try:
            while True:
                if not piggyback and len(held) >= 100:
                    client.ackDequeuedJobs(context(), _ack(queue, held))
                    completed.add(len(held))
                    held = []
                acks = _ack(queue, held) if held and piggyback else None
                request = pinlater.PinLaterDequeueRequest(
                    queueName=queue, limit=batch, jobAckRequest=acks
                )
                started = time.perf_counter()
                answer = client.dequeueJobs(context(), request)
                latencies[index].append((time.perf_counter() - started) * 1000)
                got = list(answer.jobs or ())
                if piggyback:
                    completed.add(len(held))
                    held = got
                else:
                    held.extend(got)
                dequeued.add(len(got))
                if dequeued.get() >= jobs:
                    return
                if got:
                    empty_since = None
                    continue
                # Every job is projected before the run starts (prefill), so an empty
                # answer before the end means another thread holds the rest; a long
                # empty spell means something is wrong.
                now = time.monotonic()
                empty_since = empty_since or now
                if now - empty_since > 60:
                    raise RuntimeError(f"{queue}: no job to dequeue for 60 s")
                time.sleep(0.001)
        finally:
            if held:
                client.ackDequeuedJobs(context(), _ack(queue, held))
                completed.add(len(held))
            client.close()

    with Progress(label, jobs, completed.get):
        seconds = _run_threads(threads, work, cpu)
    if cpu is not None:
        cpu.jobs = completed.get()
    return CompleteResult(completed.get(), seconds, [x for part in latencies for x in part])


def visible(port: int, queue: str, samples: int, gap_s: float = 0.02) -> list[float]:
    """Enqueue one job every `gap_s` while one client polls dequeue (limit 1, a 1 ms
    pause after an empty answer); returns each job's enqueue-call start -> dequeue
    answer time in ms."""
    sent: dict[bytes, float] = {}
    got: dict[bytes, float] = {}
    stop = threading.Event()
    errors: list[BaseException] = []

    def poll() -> None:
        client = connect(port)
        held: list[str] = []
        try:
            while not stop.is_set():
                answer = client.dequeueJobs(
                    context(),
                    pinlater.PinLaterDequeueRequest(
                        queueName=queue, limit=1, jobAckRequest=_ack(queue, held) if held else None
                    ),
                )
                now = time.perf_counter()
                jobs = answer.jobs or {}
                for body in jobs.values():
                    got.setdefault(body, now)
                held = list(jobs)
                if not jobs:
                    time.sleep(0.001)
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    # Warm up: the owner serves a new queue's partitions a moment after createQueue.
    enqueue(port, queue, 4, 1, 1, "enqueue -> dequeue (warm-up)")
    client = connect(port)
    poller = threading.Thread(target=poll, daemon=True, name="bench-poller")
    poller.start()
    deadline = time.monotonic() + 60
    while len(got) < 4 and time.monotonic() < deadline and not errors:
        time.sleep(0.05)
    got.clear()
    try:
        with Progress("enqueue -> dequeue", samples, lambda: len(got)):
            for i in range(samples):
                body = b"visible-%d" % i
                request = pinlater.PinLaterEnqueueRequest(
                    queueName=queue, jobs=[pinlater.PinLaterJob(body=body)]
                )
                sent[body] = time.perf_counter()
                client.enqueueJobs(context(), request)
                time.sleep(gap_s)
            deadline = time.monotonic() + 30
            while len(got) < samples and time.monotonic() < deadline and not errors:
                time.sleep(0.01)
    finally:
        stop.set()
        poller.join()
        client.close()
    if errors:
        raise errors[0]
    return [(got[body] - sent[body]) * 1000 for body in sent if body in got]


@dataclass
class ReplayResult:
    events: int
    seconds: float
    identical: bool

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def _log(kafka: str, client: str) -> Log:
    """The log on `client`, the Kafka client the server and `pinledger replay` use."""
    return open_log(KafkaSettings(bootstrap=kafka, client_id="pinledger-bench"), client)


def replay_rate(kafka: str, store_dsn: str, prefix: str, schema: str, client: str) -> ReplayResult:
    """`pinledger replay` as an operator runs it by default: a verify of everything the
    benchmark wrote against the live tables, one process per core, on `client`."""
    live = open_store(store_dsn, schema)
    log = _log(kafka, client)
    done = Counter()
    bar = Progress("replay (events verified)", 0, done.get)

    def progress(events: int, total: int) -> None:
        done.value = events

    try:
        with bar:
            report = verify(
                live,
                log,
                prefix,
                Scope(),
                workers=os.cpu_count() or 1,
                open_ports=functools.partial(_replay_ports, kafka, store_dsn, schema, client),
                progress=progress,
            )
    finally:
        log.close()
        live.close()
    return ReplayResult(report.events, report.seconds, report.identical)


def _replay_ports(kafka: str, store_dsn: str, schema: str, client: str) -> tuple[LedgerStore, Log]:
    """A verify worker's store and log (module level: pickled to the process)."""
    return open_store(store_dsn, schema), _log(kafka, client)


def scratch_replay_rate(
    kafka: str, store_dsn: str, prefix: str, schema: str, client: str
) -> ReplayResult:
    """`pinledger replay --into-schema` of everything the benchmark wrote, on `client`."""
    live = open_store(store_dsn, schema)
    scratch = open_store(store_dsn, f"{schema}_replay")
    log = _log(kafka, client)
    done = Counter()
    bar = Progress("replay (events projected)", 0, done.get)

    def progress(events: int, total: int) -> None:
        done.value = events

    try:
        with bar:
            report = replay(live, scratch, log, prefix, Scope(), progress)
    finally:
        log.close()
        live.close()
        scratch.drop()
    return ReplayResult(report.events, report.seconds, report.identical)
