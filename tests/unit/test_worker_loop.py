"""The whole Worker against an in-memory queue server, without servers or sleeps: every
outcome's ack reaches the server before run() returns, the grace period runs on the
worker's clock (a fake one here) and the jobs still running after it are handed back,
their late results dropped, and SIGTERM stops the worker gracefully."""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest

from pinledger.client.job_context import JobContext
from pinledger.client.jobs import Checkpoint
from pinledger.client.retry import constant
from pinledger.client.worker import Worker
from pinledger.ledger.fake_clock import FakeClock
from tests.unit.queue_server import WAIT_S, Q, QueueServer, running, wait_until


def test_every_outcome_is_acked_by_the_time_run_returns() -> None:
    server = QueueServer([b"ok", b"fail", b"ok", b"again", b"fail"])

    def handler(job: JobContext) -> str | None:
        if job.body == b"fail":
            raise ValueError("bad input")
        if job.body == b"again":
            job.reschedule(123, new_body="step 2")
        return "done"

    worker = Worker(server, Q, handler, concurrency=2, batch_size=2, retry=constant(7))
    with running(worker) as thread:
        wait_until(lambda: worker.processed == 5)
        worker.stop()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert sorted(a.descriptor for a in server.succeeded) == [f"{Q}:s1:p0:0", f"{Q}:s1:p0:2"]
    assert {a.append_status for a in server.succeeded} == {"done"}
    assert sorted(a.descriptor for a in server.failed) == [f"{Q}:s1:p0:1", f"{Q}:s1:p0:4"]
    assert {(a.append_status, a.retry_delay_ms) for a in server.failed} == {
        ("attempt 1 failed: ValueError: bad input; retry in 7 s\n", 7000)
    }
    moved = [c for c in server.checkpoints if c.move_to_pending]
    assert moved == [
        Checkpoint(f"{Q}:s1:p0:3", new_body="step 2", move_to_pending=True, run_after_ms=123)
    ]
    counters = worker.counters
    assert (counters.succeeded, counters.retried, counters.rescheduled) == (2, 2, 1)
    assert (counters.failed, counters.released) == (0, 0)


def test_jobs_still_running_after_the_grace_period_are_released_and_their_result_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    server = QueueServer([b"slow"])
    started, finish = threading.Event(), threading.Event()

    def handler(job: JobContext) -> str:
        started.set()
        finish.wait(WAIT_S)
        return "finished late"

    worker = Worker(server, Q, handler, grace_s=30, clock=clock)
    caplog.set_level(logging.WARNING, "pinledger.worker")
    with running(worker) as thread:
        assert started.wait(WAIT_S)
        worker.stop()
        # The grace period is 30 s of the worker's clock: the run ends once they pass
        # (the clock moves on until then, as the shutdown may not have started yet).
        for _ in range(WAIT_S * 20):
            clock.advance(30)
            thread.join(0.05)
            if not thread.is_alive():
                break
        assert not thread.is_alive()
    assert server.checkpoints == [Checkpoint(f"{Q}:s1:p0:0", move_to_pending=True)]
    assert (worker.counters.released, worker.processed) == (1, 0)
    finish.set()
    wait_until(lambda: "finished after it was released at shutdown" in caplog.text)
    assert server.succeeded == server.failed == []
    assert worker.processed == 0


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers are installed from the main thread only",
)
def test_sigterm_stops_the_worker_after_its_running_job() -> None:
    server = QueueServer([b"job"])
    previous = signal.getsignal(signal.SIGTERM)

    def handler(job: JobContext) -> str:
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill <pid>` would, while the job runs
        return "done"

    worker = Worker(server, Q, handler, grace_s=WAIT_S)
    worker.run()  # returns once SIGTERM stopped it
    assert [a.descriptor for a in server.succeeded] == [f"{Q}:s1:p0:0"]
    assert (worker.processed, worker.counters.released) == (1, 0)
    assert signal.getsignal(signal.SIGTERM) is previous
