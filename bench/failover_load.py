"""The steady load of `python -m bench.failover`: producers enqueueing and workers
dequeueing small batches and acking them at once, each thread with its own client,
round robin over the servers and moving to the next one when a call fails. It records
when each enqueue and each dequeue that returned jobs started and ended, with the jobs'
descriptors (their partitions), and every failed call: what a user of the servers
sees, from outside.

`servers` is read at each (re)connection, so the benchmark can put a replacement server
in a dead one's place while the load runs."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pinledger.idl import pinlater as p
from pinledger.ledger import descriptor
from pinledger.service.testing.servers import ServerProcess, connect, describe

# A client gives up on a call after this long and moves to the next server.
CALL_TIMEOUT_MS = 10_000
# After a failed call, before the next server is tried: short, so the pause a user
# sees is the servers' and not the load's.
RETRY_PAUSE_S = 0.02
# A worker whose dequeue came back empty waits this long before asking again.
IDLE_PAUSE_S = 0.02
ENQUEUE_BATCH = 5
DEQUEUE_LIMIT = 5
BODY = b'{"task":"failover"}'
# The highest: the load's jobs go ahead of the benchmark's backlog (bench/failover.py).
LOAD_PRIORITY = 1


@dataclass(frozen=True, slots=True)
class Answer:
    """A dequeue that returned jobs: when it started and ended (monotonic seconds), its
    jobs' descriptors and the partitions they came from."""

    started: float
    ended: float
    partitions: frozenset[int]
    jobs: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Enqueue:
    """An enqueue that succeeded: when it started and ended, the partition that took its
    jobs (a server puts one call's jobs in one partition) and their descriptors."""

    started: float
    ended: float
    partition: int
    jobs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Failure:
    """A call that failed: when it started and ended, and what it answered."""

    started: float
    ended: float
    what: str


@dataclass
class Record:
    """What the load saw; guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    answers: list[Answer] = field(default_factory=list)
    enqueues: list[Enqueue] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def answers_since(self, since: float, first: int = 0) -> list[Answer]:
        """The answers to dequeues started at or after `since`, looked for from the
        `first` answer recorded on (`len(answers)` at `since` or before: a dequeue
        started then is recorded after)."""
        with self.lock:
            return [a for a in self.answers[first:] if a.started >= since]

    def mark(self) -> int:
        """Where `answers_since` may start looking for answers to dequeues started from
        now on."""
        with self.lock:
            return len(self.answers)

    def seen(self) -> tuple[list[Enqueue], list[Answer]]:
        """Copies of the enqueues and the answers so far."""
        with self.lock:
            return list(self.enqueues), list(self.answers)

    def failures_between(self, start: float, end: float) -> list[Failure]:
        """The calls that failed (ended) in [start, end]: a call in flight at the fault
        counts."""
        with self.lock:
            return [f for f in self.failures if start <= f.ended <= end]


def _context(source: str) -> Any:
    return p.RequestContext(source=source, requestId="failover")


class Load:
    """`producers` threads enqueueing `rate` jobs/s between them, `ENQUEUE_BATCH` per
    call, and `workers` threads dequeueing up to `DEQUEUE_LIMIT` jobs and acking them at
    once. Thread i starts on server i (mod the number of servers)."""

    def __init__(
        self,
        servers: list[ServerProcess],
        queue: str,
        *,
        producers: int,
        workers: int,
        rate: float,
    ) -> None:
        self.servers = servers
        self.queue = queue
        self.record = Record()
        self.running = threading.Event()
        # Raised by `spread`: each thread then goes back to its own server.
        self.generation = 0
        # Seconds between two enqueue calls of one producer.
        self.producer_pause_s = producers * ENQUEUE_BATCH / rate
        self.threads = [
            threading.Thread(target=self._produce, args=(i,), daemon=True, name=f"producer{i}")
            for i in range(producers)
        ] + [
            threading.Thread(target=self._work, args=(i,), daemon=True, name=f"worker{i}")
            for i in range(workers)
        ]

    def __enter__(self) -> Load:
        self.running.set()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.running.clear()
        for thread in self.threads:
            thread.join(timeout=CALL_TIMEOUT_MS / 1000 + 5)

    def spread(self) -> None:
        """Send every thread back to the server it started on (after a replacement took
        a dead server's place: the threads that left it come back)."""
        self.generation += 1

    def _serve(self, home: int, call: Callable[[Any], float]) -> None:
        """Run `call(client)` until the load stops, on a client of server `home % n`,
        moving to the next server after a failure (and home again on `spread`); `call`
        returns how long to pause."""
        client: Any = None
        turn, generation = home, self.generation
        while self.running.is_set():
            if generation != self.generation:
                if client is not None:
                    client.close()
                client, turn, generation = None, home, self.generation
            started = time.monotonic()
            try:
                if client is None:
                    server = self.servers[turn % len(self.servers)]
                    client = connect(server.port, timeout_ms=CALL_TIMEOUT_MS)
                pause = call(client)
            except Exception as exc:
                failure = Failure(started, time.monotonic(), describe(exc))
                with self.record.lock:
                    self.record.failures.append(failure)
                if client is not None:
                    client.close()
                client = None
                turn += 1
                time.sleep(RETRY_PAUSE_S)
                continue
            if pause > 0:
                time.sleep(pause)
        if client is not None:
            client.close()

    def _produce(self, index: int) -> None:
        source = f"bench:failover-producer{index}"
        request = p.PinLaterEnqueueRequest(
            queueName=self.queue,
            jobs=[p.PinLaterJob(body=BODY, priority=LOAD_PRIORITY)] * ENQUEUE_BATCH,
        )
        next_at = time.monotonic()

        def enqueue(client: Any) -> float:
            nonlocal next_at
            started = time.monotonic()
            answer = client.enqueueJobs(_context(source), request)
            jobs = tuple(answer.jobDescriptors)
            done = Enqueue(started, time.monotonic(), descriptor.parse(jobs[0]).partition, jobs)
            with self.record.lock:
                self.record.enqueues.append(done)
            # Random gaps (exponential, of the rate's mean): calls at a fixed period
            # would meet a server's partition rotation (Config.enqueue_sticky_ms) in
            # step and feed a few partitions only. Past a stall the schedule restarts.
            next_at = max(next_at + random.expovariate(1 / self.producer_pause_s), started - 1.0)
            return next_at - time.monotonic()

        self._serve(index, enqueue)

    def _work(self, index: int) -> None:
        source = f"bench:failover-worker{index}"

        def work(client: Any) -> float:
            started = time.monotonic()
            answer = client.dequeueJobs(
                _context(source),
                p.PinLaterDequeueRequest(queueName=self.queue, limit=DEQUEUE_LIMIT),
            )
            ended = time.monotonic()
            jobs: dict[str, bytes] = dict(answer.jobs or {})
            if not jobs:
                return IDLE_PAUSE_S
            # Only the load's own jobs are recorded: a backlog's (bench/failover.py
            # --backlog, due in a day) would be acked and left out of the figures.
            ours = frozenset(d for d, body in jobs.items() if body == BODY)
            if ours:
                partitions = frozenset(descriptor.parse(d).partition for d in ours)
                with self.record.lock:
                    self.record.answers.append(Answer(started, ended, partitions, ours))
            acks = [p.PinLaterJobAckInfo(jobDescriptor=d) for d in jobs]
            client.ackDequeuedJobs(
                _context(source),
                p.PinLaterJobAckRequest(queueName=self.queue, jobsSucceeded=acks),
            )
            return 0.0

        self._serve(index, work)
