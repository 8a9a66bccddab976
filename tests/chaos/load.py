"""Enqueue + dequeue + ack load through several servers, recording what a user checks
after a fault: which enqueues were acknowledged, how many times each job ran, when
each kind of call last succeeded, and what the failed calls answered.

A worker "runs" a job (counts it) and then acks it. An ack is safe to repeat, so a
worker whose ack failed (its server died, froze, or stopped) sends it again, on
another server, until it lands or is refused for good. A job runs twice legitimately
(at-least-once) only when its claim may have timed out before its ack landed: an ack
that landed more than the claim timeout after its dequeue began, or never did. Such
jobs are "late"; a second run of any other job means the service handed a claimed job
out twice.

`Traffic` is the load; how a thread reaches the servers is its `Caller`: `Load` here
(a Thrift client per thread, moving to the next server after a failure), `ClientLoad`
(tests/chaos/client_load.py) the project's PinLaterClient.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

from thriftpy2.thrift import TApplicationException

from pinledger.idl import pinlater as p
from pinledger.ledger import descriptor
from pinledger.service.testing.servers import ServerProcess, connect, context, describe

# Longer than the server's own bound on a call (PINLEDGER_APPEND_TIMEOUT_S, 15 s), so
# what a call answers is what gets recorded; past it the client gives up on a frozen
# server and moves to the next one, as PinLater clients with a server list do.
CALL_TIMEOUT_MS = 20_000
# Claim timeouts count as attempts: enough that no job fails for lack of them.
ATTEMPTS = 100
LOOKUP_CHUNK = 500
# Past this since its dequeue began a failing ack is given up (the job's claim has
# long timed out: it runs again, legitimately).
ACK_PATIENCE_S = 60
SUCCEEDED = p.PinLaterJobState.SUCCEEDED
# Answers that say the storage behind the server was unavailable: sent again, the call
# may succeed (the client's TRANSIENT_CODES).
TRANSIENT = frozenset({p.ErrorCode.NO_HEALTHY_SHARDS, p.ErrorCode.SHARD_CONNECTION_FAILED})


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
    # Bodies whose ack landed more than the claim timeout after its dequeue began, or
    # never: a later run of one is at-least-once, not a double hand-out.
    late: set[bytes] = field(default_factory=set)
    # Acks sent again after a failure.
    ack_retries: int = 0
    # Bursts of enqueues started (Traffic.burst).
    bursts: int = 0
    enqueue_ok: list[float] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def failed(self, started: float, exc: BaseException, call: str = "") -> None:
        """A failed call (`call`: which, named first in what is recorded)."""
        what = f"{call}: {describe(exc)}" if call else describe(exc)
        with self.lock:
            self.failures.append(Failure(started, time.monotonic() - started, what))


class Caller(Protocol):
    """One load thread's way to the servers."""

    def enqueue(self, queue: str, bodies: list[bytes], source: str) -> list[str]:
        """One enqueueJobs of jobs with these bodies and ATTEMPTS attempts each; their
        descriptors, in order."""
        ...

    def dequeue(self, queue: str, limit: int, source: str) -> dict[str, bytes]: ...

    def ack(self, queue: str, descriptors: list[str], source: str) -> None:
        """Acks them succeeded."""
        ...

    def retryable(self, exc: Exception) -> bool:
        """Whether a failed ack may land when sent again: the server did not refuse it
        for good (its connection broke, it timed out, its storage was unavailable)."""
        ...

    def failed(self) -> None:
        """A call failed: what to do before the next one."""
        ...

    def close(self) -> None: ...


class Traffic:
    """Producers and workers on threads, each with its own Caller; see the module
    docstring."""

    def __init__(
        self,
        queue: str,
        *,
        producers: int = 1,
        workers: int = 2,
        batch: int = 5,
        pause_s: float = 0.05,
        claim_timeout_s: float = 5.0,
    ) -> None:
        self.queue = queue
        self.batch = batch
        self.pause_s = pause_s
        self.claim_timeout_s = claim_timeout_s
        self.record = Record()
        self.producing = threading.Event()
        self.working = threading.Event()
        self.threads = [
            threading.Thread(target=self._produce, args=(i,), daemon=True) for i in range(producers)
        ] + [threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(workers)]

    def caller(self, turn: int) -> Caller:
        """The Caller of the thread numbered `turn` among its kind."""
        raise NotImplementedError

    def __enter__(self) -> Self:
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

    def _serve(
        self, turn: int, call: Callable[[Caller], bool], running: threading.Event, name: str
    ) -> None:
        """Run `call(caller)` until `running` clears; after a failure (recorded as
        `name`'s) the caller is told (the direct one moves to the next server). `call`
        says whether to pause before the next call."""
        caller = self.caller(turn)
        try:
            while running.is_set():
                started = time.monotonic()
                try:
                    if call(caller):
                        time.sleep(self.pause_s)
                except Exception as exc:
                    self.record.failed(started, exc, name)
                    caller.failed()
                    time.sleep(0.1)
        finally:
            caller.close()

    def _enqueue(self, caller: Caller, bodies: list[bytes], source: str) -> None:
        """One enqueue call, recorded: acknowledged, or not (and raised)."""
        started = time.monotonic()
        try:
            descriptors = caller.enqueue(self.queue, bodies, source)
        except Exception:
            with self.record.lock:
                self.record.unacknowledged_enqueues += 1
            raise
        with self.record.lock:
            self.record.enqueued.update(zip(descriptors, bodies, strict=True))
            self.record.enqueue_ok.append(started)

    def _produce(self, index: int) -> None:
        sequence = iter(range(10**9))
        source = f"chaos:producer{index}"

        def enqueue(caller: Caller) -> bool:
            self._enqueue(
                caller, [f"p{index}-{next(sequence)}".encode() for _ in range(self.batch)], source
            )
            return True

        self._serve(index, enqueue, self.producing, "enqueue")

    def burst(self, calls: int, batch: int) -> list[threading.Thread]:
        """Start `calls` enqueues of `batch` jobs each at once, a thread and a Caller
        each (many calls in flight at one moment, some on connections just opened),
        recorded like the producers' calls. The threads, for the caller to join."""
        with self.record.lock:
            self.record.bursts += 1
            tag = f"b{self.record.bursts}"
        threads = [
            threading.Thread(target=self._burst_call, args=(tag, n, batch), daemon=True)
            for n in range(calls)
        ]
        for thread in threads:
            thread.start()
        return threads

    def _burst_call(self, tag: str, n: int, batch: int) -> None:
        caller = self.caller(n)
        started = time.monotonic()
        try:
            self._enqueue(caller, [f"{tag}-{n}-{i}".encode() for i in range(batch)], "chaos:burst")
        except Exception as exc:
            self.record.failed(started, exc, "enqueue (burst)")
        finally:
            caller.close()

    def _work(self, index: int) -> None:
        source = f"chaos:worker{index}"

        def work(caller: Caller) -> bool:
            started = time.monotonic()
            jobs = caller.dequeue(self.queue, 10, source)
            if not jobs:
                return True
            with self.record.lock:
                self.record.runs.update(jobs.values())
            landed = self._ack(caller, jobs, started, source)
            if landed:
                partitions = frozenset(descriptor.parse(d).partition for d in jobs)
                with self.record.lock:
                    self.record.rounds.append(Round(started, partitions))
            return False

        self._serve(index, work, self.working, "dequeue")

    def _ack(self, caller: Caller, jobs: dict[str, bytes], started: float, source: str) -> bool:
        """Ack the jobs, sending the ack again after a failure (each failure recorded)
        until it lands, is refused for good, ACK_PATIENCE_S passed or the workers are
        stopped; marks the jobs late unless it landed within the claim timeout of
        `started`."""
        landed = False
        while True:
            attempt = time.monotonic()
            try:
                caller.ack(self.queue, list(jobs), source)
                landed = True
                break
            except Exception as exc:
                self.record.failed(attempt, exc, "ack")
                caller.failed()
                gave_up = attempt - started > ACK_PATIENCE_S or not self.working.is_set()
                if gave_up or not caller.retryable(exc):
                    break
                with self.record.lock:
                    self.record.ack_retries += 1
                time.sleep(0.1)
        if not landed or time.monotonic() - started > self.claim_timeout_s:
            with self.record.lock:
                self.record.late.update(jobs.values())
        return landed

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

    def double_hand_outs(self) -> dict[bytes, int]:
        """The jobs run more than once although every ack of theirs landed within the
        claim timeout: handed out again while claimed. Body -> runs."""
        with self.record.lock:
            return {
                body: count
                for body, count in self.record.runs.items()
                if count > 1 and body not in self.record.late
            }

    def failures_between(self, start: float, end: float) -> list[Failure]:
        with self.record.lock:
            return [f for f in self.record.failures if start <= f.started <= end]


class Load(Traffic):
    """The load through raw Thrift clients: each thread talks to one server of
    `servers` (a list the caller may change: a restarted server's replacement) and
    moves to the next one after a failure."""

    def __init__(self, servers: Sequence[ServerProcess], queue: str, **options: Any) -> None:
        super().__init__(queue, **options)
        self.servers = list(servers)

    def caller(self, turn: int) -> Caller:
        return DirectCaller(self.servers, turn)


class DirectCaller:
    """A Thrift client of server `turn % n`, reconnected to the next one after a
    failure."""

    def __init__(self, servers: list[ServerProcess], turn: int) -> None:
        self.servers = servers
        self.turn = turn
        self.client: Any = None

    def _client(self) -> Any:
        if self.client is None:
            server = self.servers[self.turn % len(self.servers)]
            self.client = connect(server.port, timeout_ms=CALL_TIMEOUT_MS)
        return self.client

    def enqueue(self, queue: str, bodies: list[bytes], source: str) -> list[str]:
        jobs = [p.PinLaterJob(body=b, numAttemptsAllowed=ATTEMPTS) for b in bodies]
        answer = self._client().enqueueJobs(
            context(source), p.PinLaterEnqueueRequest(queueName=queue, jobs=jobs)
        )
        descriptors: list[str] = answer.jobDescriptors
        return descriptors

    def dequeue(self, queue: str, limit: int, source: str) -> dict[str, bytes]:
        answer = self._client().dequeueJobs(
            context(source), p.PinLaterDequeueRequest(queueName=queue, limit=limit)
        )
        return dict(answer.jobs or {})

    def ack(self, queue: str, descriptors: list[str], source: str) -> None:
        acks = [p.PinLaterJobAckInfo(jobDescriptor=d) for d in descriptors]
        self._client().ackDequeuedJobs(
            context(source), p.PinLaterJobAckRequest(queueName=queue, jobsSucceeded=acks)
        )

    def retryable(self, exc: Exception) -> bool:
        if isinstance(exc, p.PinLaterException):
            return exc.errorCode in TRANSIENT
        return not isinstance(exc, TApplicationException)

    def failed(self) -> None:
        self.close()
        self.turn += 1

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None
