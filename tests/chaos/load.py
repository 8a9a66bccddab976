"""Enqueue + dequeue + ack load through several servers, recording what a user checks
after a fault: which enqueues were acknowledged, how many times each job ran, when
each kind of call last succeeded, and what the failed calls answered.

A worker "runs" a job (counts it) and then acks it; an ack that fails leaves the job
claimed until its claim times out, after which it is dequeued and run again: the
duplicate runs of at-least-once delivery, which the chaos table reports.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pinledger.idl import pinlater as p
from pinledger.ledger import descriptor
from pinledger.service.testing.servers import ServerProcess, connect, context

# Longer than the server's own bound on a call (PINLEDGER_APPEND_TIMEOUT_S, 15 s), so
# what a call answers is what gets recorded; past it the client gives up on a frozen
# server and moves to the next one, as PinLater clients with a server list do.
CALL_TIMEOUT_MS = 20_000
# Claim timeouts count as attempts: enough that no job fails for lack of them.
ATTEMPTS = 100
LOOKUP_CHUNK = 500
SUCCEEDED = p.PinLaterJobState.SUCCEEDED


@dataclass
class Round:
    """A dequeue whose jobs were all acked: when the dequeue started, which partitions."""

    started: float
    partitions: frozenset[int]


@dataclass
class Failure:
    started: float
    seconds: float
    what: str


@dataclass
class Record:
    """What the load saw. Guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # Acknowledged enqueues: descriptor -> body.
    enqueued: dict[str, bytes] = field(default_factory=dict)
    # Enqueue calls that failed: their jobs may or may not exist.
    unacknowledged_enqueues: int = 0
    # Times each body was run by a worker.
    runs: Counter[bytes] = field(default_factory=Counter)
    enqueue_ok: list[float] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def failed(self, started: float, exc: BaseException) -> None:
        with self.lock:
            self.failures.append(Failure(started, time.monotonic() - started, describe(exc)))


def describe(exc: BaseException) -> str:
    """What a client saw, on one line: the PinLater error code and message, or the
    transport error."""
    if isinstance(exc, p.PinLaterException):
        code = p.ErrorCode._VALUES_TO_NAMES.get(exc.errorCode, exc.errorCode)
        return f"PinLaterException {code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


class Load:
    """Producers and workers on threads, each with its own client, each moving to the
    next server when a call fails."""

    def __init__(
        self,
        servers: Sequence[ServerProcess],
        queue: str,
        *,
        producers: int = 1,
        workers: int = 2,
        batch: int = 5,
        pause_s: float = 0.05,
    ) -> None:
        self.servers = list(servers)
        self.queue = queue
        self.batch = batch
        self.pause_s = pause_s
        self.record = Record()
        self.producing = threading.Event()
        self.working = threading.Event()
        self.threads = [
            threading.Thread(target=self._produce, args=(i,), daemon=True) for i in range(producers)
        ] + [threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(workers)]

    def __enter__(self) -> Load:
        self.producing.set()
        self.working.set()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.producing.clear()
        self.working.clear()
        for thread in self.threads:
            thread.join(timeout=30)

    def stop_producing(self) -> None:
        self.producing.clear()

    def _serve(self, turn: int, call: Callable[[Any], bool], running: threading.Event) -> None:
        """Run `call(client)` until `running` clears, with a client of server
        `turn % n`, moving to the next server after a failure. `call` says whether
        to pause before the next call."""
        client: Any = None
        while running.is_set():
            started = time.monotonic()
            try:
                if client is None:
                    server = self.servers[turn % len(self.servers)]
                    client = connect(server.port, timeout_ms=CALL_TIMEOUT_MS)
                if call(client):
                    time.sleep(self.pause_s)
            except Exception as exc:
                self.record.failed(started, exc)
                if client is not None:
                    client.close()
                client = None
                turn += 1
                time.sleep(0.1)
        if client is not None:
            client.close()

    def _produce(self, index: int) -> None:
        sequence = iter(range(10**9))

        def enqueue(client: Any) -> bool:
            bodies = [f"p{index}-{next(sequence)}".encode() for _ in range(self.batch)]
            started = time.monotonic()
            jobs = [p.PinLaterJob(body=b, numAttemptsAllowed=ATTEMPTS) for b in bodies]
            try:
                answer = client.enqueueJobs(
                    context(f"chaos:producer{index}"),
                    p.PinLaterEnqueueRequest(queueName=self.queue, jobs=jobs),
                )
            except Exception:
                with self.record.lock:
                    self.record.unacknowledged_enqueues += 1
                raise
            with self.record.lock:
                self.record.enqueued.update(zip(answer.jobDescriptors, bodies, strict=True))
                self.record.enqueue_ok.append(started)
            return True

        self._serve(index, enqueue, self.producing)

    def _work(self, index: int) -> None:
        source = f"chaos:worker{index}"

        def work(client: Any) -> bool:
            started = time.monotonic()
            answer = client.dequeueJobs(
                context(source), p.PinLaterDequeueRequest(queueName=self.queue, limit=10)
            )
            jobs: dict[str, bytes] = dict(answer.jobs or {})
            if not jobs:
                return True
            with self.record.lock:
                self.record.runs.update(jobs.values())
            acks = [p.PinLaterJobAckInfo(jobDescriptor=d) for d in jobs]
            client.ackDequeuedJobs(
                context(source), p.PinLaterJobAckRequest(queueName=self.queue, jobsSucceeded=acks)
            )
            partitions = frozenset(descriptor.parse(d).partition for d in jobs)
            with self.record.lock:
                self.record.rounds.append(Round(started, partitions))
            return False

        self._serve(index, work, self.working)

    # ---------------------------------------------------------------- findings ----

    def served_again(self, since: float, partitions: int) -> float | None:
        """Seconds from `since` until the service was whole again: an enqueue and, for
        every partition, a dequeue + ack, each started at or after `since`. None while
        it is not."""
        with self.record.lock:
            enqueues = [t for t in self.record.enqueue_ok if t >= since]
            rounds = [r for r in self.record.rounds if r.started >= since]
        if not enqueues:
            return None
        last = min(enqueues)
        for partition in range(partitions):
            starts = [r.started for r in rounds if partition in r.partitions]
            if not starts:
                return None
            last = max(last, min(starts))
        return last - since

    def served_between(self, start: float, end: float) -> set[int]:
        """The partitions a dequeue + ack started in [start, end) covered."""
        with self.record.lock:
            return {p for r in self.record.rounds if start <= r.started < end for p in r.partitions}

    def since(self, start: float) -> str:
        """What worked and what failed since `start`, for a failure message."""
        with self.record.lock:
            enqueues = sum(1 for t in self.record.enqueue_ok if t >= start)
            served = sorted(
                {p for r in self.record.rounds if r.started >= start for p in r.partitions}
            )
            failures = Counter(f.what[:150] for f in self.record.failures if f.started >= start)
        lines = [f"{enqueues} enqueues succeeded; partitions served: {served}; failed calls:"]
        lines += [f"  {count} x {what}" for what, count in failures.most_common(6)]
        return "\n".join(lines)

    def unfinished(self, client: Any) -> list[str]:
        """The acknowledged enqueues whose jobs are not SUCCEEDED yet."""
        with self.record.lock:
            wanted = list(self.record.enqueued)
        left: list[str] = []
        for start in range(0, len(wanted), LOOKUP_CHUNK):
            chunk = wanted[start : start + LOOKUP_CHUNK]
            found = client.lookupJobs(context(), p.PinLaterLookupJobRequest(jobDescriptors=chunk))
            left += [d for d in chunk if d not in found or found[d].jobState != SUCCEEDED]
        return left

    def duplicate_runs(self) -> int:
        with self.record.lock:
            return sum(count - 1 for count in self.record.runs.values() if count > 1)

    def failures_between(self, start: float, end: float) -> list[Failure]:
        with self.record.lock:
            return [f for f in self.record.failures if start <= f.started <= end]
