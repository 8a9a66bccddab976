"""Load on a queue that is deleted and created again under its name while it runs: an
enqueuer and a worker (dequeue + ack) on threads, through every server of the stage,
across each deletion and creation, which say from which incarnation each job must or
must not be seen (tests/chaos/test_queue_incarnations.py).

A job's body names the round (the incarnation) the queue was in when its enqueue was
called: "r<round>-<n>" when it was settled in it, "x<round>-<n>" while it was being
deleted and created for that round. An enqueue is attributed by when it was answered:
- called and answered within one settled round: that round's job, which must be served;
- answered after the deletion began and before the creation began: it went with the old
  queue (or nowhere: the old topic was gone), and must never be seen in the new one;
- spanning the creation: either, not checked.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pinledger.idl import pinlater as p
from pinledger.service.testing.servers import ServerProcess, connect, context, describe
from tests.chaos.load import CALL_TIMEOUT_MS

SETTLED, DELETING, CREATING = "settled", "deleting", "creating"
SOURCE = "chaos:incarnations"
# Between calls: light load, so that the owners catch up within seconds after each
# rebalance on a small machine.
PAUSE_S = 0.1


def round_of(body: bytes) -> int:
    """The round a job's body names."""
    return int(body.split(b"-", 1)[0][1:])


@dataclass
class Incarnations:
    """Guarded by `lock`."""

    queue: str
    # The stage's list of servers, as it changes (servers join and are killed).
    servers: list[ServerProcess]
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The round the queue is in and its phase; `changes` counts the changes, so that a
    # call knows whether one happened while it ran.
    round: int = 0
    phase: str = SETTLED
    changes: int = 0
    # Per round: its acknowledged enqueues, descriptor -> body.
    acked: dict[int, dict[str, bytes]] = field(default_factory=dict)
    # The enqueues that went with a deleted queue: descriptor -> body.
    gone: dict[str, bytes] = field(default_factory=dict)
    # What dequeues in a settled round handed out: body -> that round.
    handed_out: dict[bytes, int] = field(default_factory=dict)
    # When a job of each round was first dequeued and acked, in that round.
    served_at: dict[int, float] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    producing: threading.Event = field(default_factory=threading.Event)
    working: threading.Event = field(default_factory=threading.Event)
    sequence: Iterator[int] = field(default_factory=lambda: iter(range(10**9)))

    def to(self, round_: int, phase: str) -> None:
        with self.lock:
            self.round, self.phase = round_, phase
            self.changes += 1

    def failed(self, exc: Exception) -> None:
        with self.lock:
            self.failures[describe(exc)[:110]] += 1

    def _now(self) -> tuple[int, str, int]:
        with self.lock:
            return self.round, self.phase, self.changes

    @contextmanager
    def running(self) -> Iterator[Incarnations]:
        self.producing.set()
        self.working.set()
        threads = [
            threading.Thread(
                target=self._serve, args=(0, self._enqueue, self.producing), daemon=True
            ),
            threading.Thread(target=self._serve, args=(1, self._work, self.working), daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self.producing.clear()
            self.working.clear()
            for thread in threads:
                thread.join(timeout=30)

    def _serve(self, turn: int, call: Callable[[Any], None], running: threading.Event) -> None:
        """`call(client)` until `running` clears, moving to the next server after a
        failure (as tests/chaos/load.py does)."""
        client: Any = None
        while running.is_set():
            try:
                if client is None:
                    server = self.servers[turn % len(self.servers)]
                    client = connect(server.port, timeout_ms=CALL_TIMEOUT_MS)
                call(client)
                time.sleep(PAUSE_S)
            except Exception as exc:
                self.failed(exc)
                if client is not None:
                    client.close()
                client = None
                turn += 1
                time.sleep(0.1)
        if client is not None:
            client.close()

    def _enqueue(self, client: Any) -> None:
        called = round_, phase, _ = self._now()
        tag = f"{'r' if phase == SETTLED else 'x'}{round_}"
        bodies = [f"{tag}-{next(self.sequence)}".encode() for _ in range(3)]
        answer = client.enqueueJobs(
            context(SOURCE),
            p.PinLaterEnqueueRequest(
                queueName=self.queue,
                jobs=[p.PinLaterJob(body=b, numAttemptsAllowed=100) for b in bodies],
            ),
        )
        jobs = dict(zip(answer.jobDescriptors, bodies, strict=True))
        with self.lock:
            if phase == SETTLED and (self.round, self.phase, self.changes) == called:
                self.acked.setdefault(round_, {}).update(jobs)
            elif self.phase == DELETING:
                self.gone.update(jobs)

    def _work(self, client: Any) -> None:
        called = round_, phase, _ = self._now()
        answer = client.dequeueJobs(
            context(SOURCE), p.PinLaterDequeueRequest(queueName=self.queue, limit=100)
        )
        jobs: dict[str, bytes] = dict(answer.jobs or {})
        if not jobs:
            return
        client.ackDequeuedJobs(
            context(SOURCE),
            p.PinLaterJobAckRequest(
                queueName=self.queue,
                jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=d) for d in jobs],
            ),
        )
        if phase != SETTLED or self._now() != called:
            return  # a dequeue that spanned a deletion may have served the old queue
        with self.lock:
            self.handed_out.update(dict.fromkeys(jobs.values(), round_))
            if any(b.startswith(b"r") and round_of(b) == round_ for b in jobs.values()):
                self.served_at.setdefault(round_, time.monotonic())

    def stale(self) -> list[str]:
        """The jobs a dequeue in a settled round handed out that belong to an earlier
        round or went with a deleted queue."""
        with self.lock:
            gone = set(self.gone.values())
            return [
                f"a dequeue in round {r} handed out {b!r}"
                for b, r in self.handed_out.items()
                if round_of(b) < r or b in gone
            ]

    def not_this_round(self, current: int) -> tuple[set[str], set[bytes]]:
        """The descriptors of the enqueues that must not be seen in round `current` (a job
        of this round may have the same descriptor: the body tells), and their bodies."""
        with self.lock:
            old = [jobs for r, jobs in self.acked.items() if r < current] + [self.gone]
        return {d for jobs in old for d in jobs}, {b for jobs in old for b in jobs.values()}
