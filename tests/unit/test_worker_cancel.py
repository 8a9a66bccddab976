"""A Worker whose job an operator cancels (decision 0036), against an in-memory queue
server that answers checkpoints of cancelled jobs as pinledger does: the handler's
next `checkpoint()` raises JobCancelled, or a heartbeat hears it first and the
handler sees `cancelled`; either way the worker sends no ack for the job, and the other
jobs go on."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from pinledger.client.errors import JobCancelled
from pinledger.client.job_context import JobContext
from pinledger.client.jobs import Checkpoint
from pinledger.client.worker import Worker
from pinledger.client.worker.heartbeat import beat
from tests.unit.queue_server import WAIT_S, Q, QueueServer, running, wait_until

CANCELLED = f"{Q}:s1:p0:0"


class CancellingServer(QueueServer):
    """Checkpoints of jobs in `cancelled` are refused with their descriptors, after the
    others are recorded (as pinledger's checkpointJobs does)."""

    def __init__(self, bodies: Iterable[bytes]) -> None:
        super().__init__(bodies)
        self.cancelled: set[str] = set()

    def checkpoint(self, queue: str, checkpoints: Iterable[Checkpoint]) -> None:
        asked = list(checkpoints)
        super().checkpoint(queue, [c for c in asked if c.descriptor not in self.cancelled])
        gone = sorted(c.descriptor for c in asked if c.descriptor in self.cancelled)
        if gone:
            raise JobCancelled(gone, f"job cancelled: {', '.join(gone)}")


def test_the_handlers_checkpoint_raises_and_the_job_is_not_acked() -> None:
    server = CancellingServer([b"long", b"short"])
    steps: list[int] = []
    caught = threading.Event()

    def handler(job: JobContext) -> str:
        if job.body == b"short":
            return "done"
        server.cancelled.add(job.descriptor)
        try:
            for step in range(1000):
                job.checkpoint(status=f"step {step} ")
                steps.append(step)
        except JobCancelled:
            assert job.cancelled
            caught.set()
            raise
        return "never"

    worker = Worker(server, Q, handler, concurrency=2)
    with running(worker) as thread:
        wait_until(lambda: worker.processed == 2)
        worker.stop()
        thread.join(WAIT_S)
    assert caught.is_set()
    assert steps == []  # stopped at its first checkpoint
    assert [a.descriptor for a in server.succeeded] == [f"{Q}:s1:p0:1"]
    assert server.failed == []  # the cancelled job is not acked as failed again
    assert all(c.descriptor != CANCELLED for c in server.checkpoints)


def test_a_heartbeat_hears_it_first_and_the_handler_sees_cancelled() -> None:
    server = CancellingServer([b"long"])
    started, heard = threading.Event(), threading.Event()

    def handler(job: JobContext) -> str:
        started.set()
        assert heard.wait(WAIT_S)
        assert job.cancelled
        return "stopped early"

    worker = Worker(server, Q, handler)
    with running(worker) as thread:
        assert started.wait(WAIT_S)
        server.cancelled.add(CANCELLED)
        beat(server, Q, worker.outbox, "test", 30.0)
        assert worker.outbox.held() == []  # the claim is gone: no more heartbeats of it
        heard.set()
        wait_until(lambda: worker.processed == 1)
        worker.stop()
        thread.join(WAIT_S)
    assert server.succeeded == server.failed == []
