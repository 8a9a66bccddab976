"""An in-memory queue server a Worker runs against in unit tests (the worker loop's and
the worker runner's), and the waits around a worker on its thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from pinledger.client.jobs import Ack, Checkpoint, DequeuedJob
from pinledger.client.worker import Worker

Q = "q"
WAIT_S = 30  # a bound on waits for other threads, never reached when all is well


class QueueServer:
    """A queue in memory: hands out its jobs and records every ack and checkpoint."""

    def __init__(self, bodies: Iterable[bytes]) -> None:
        self._lock = threading.Lock()
        self.pending = [
            DequeuedJob(f"{Q}:s1:p0:{i}", body, attempts_allowed=3, attempts_remaining=3)
            for i, body in enumerate(bodies)
        ]
        self.succeeded: list[Ack] = []
        self.failed: list[Ack] = []
        self.checkpoints: list[Checkpoint] = []

    def dequeue(
        self,
        queue: str,
        limit: int,
        *,
        succeeded: Iterable[Ack] = (),
        failed: Iterable[Ack] = (),
    ) -> list[DequeuedJob]:
        self.ack(queue, succeeded, failed)
        with self._lock:
            jobs, self.pending = self.pending[:limit], self.pending[limit:]
        return jobs

    def ack(self, queue: str, succeeded: Iterable[Ack] = (), failed: Iterable[Ack] = ()) -> None:
        with self._lock:
            self.succeeded.extend(succeeded)
            self.failed.extend(failed)

    def checkpoint(self, queue: str, checkpoints: Iterable[Checkpoint]) -> None:
        with self._lock:
            self.checkpoints.extend(checkpoints)


@contextmanager
def running(worker: Worker) -> Iterator[threading.Thread]:
    thread = worker.start()
    try:
        yield thread
    finally:
        worker.stop_now()
        thread.join(WAIT_S)


def wait_until(condition: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(WAIT_S * 100):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("the worker never got there")
