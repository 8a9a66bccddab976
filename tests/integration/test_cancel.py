"""cancelJobs against the stack (decision 0036): a real worker running a long handler
is cancelled over Thrift by an operator's client; the handler's next checkpoint raises
JobCancelled and it stops; the job is FAILED with the cancel in its custom status, no
ack of the worker changed it, and its history names the operator. And `pinledger
cancel` does the same from the command line."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from pinledger.client import JobCancelled, JobState, PinLaterClient
from pinledger.client.job_context import JobContext
from pinledger.client.worker import Worker
from pinledger.idl import pinlater
from pinledger.service.testing.servers import ServerProcess, wait_for
from tests.integration.test_worker import new_queue

pytestmark = pytest.mark.integration

WAIT_S = 60


@pytest.fixture
def pl(server: ServerProcess) -> Iterator[PinLaterClient]:
    with PinLaterClient(f"127.0.0.1:{server.port}", source=f"cancel-tests:{uuid.uuid4()}") as c:
        yield c


def _history_actions(pl: PinLaterClient, descriptor: str) -> list[tuple[str, bool, str]]:
    request = pinlater.PinLaterJobHistoryRequest(jobDescriptor=descriptor)
    history = pl.call("getJobHistory", request, idempotent=True)
    return [(s.action, s.applied, s.source) for s in history.steps]


def test_a_running_handler_is_cancelled_over_thrift_and_stops(
    pl: PinLaterClient, server: ServerProcess
) -> None:
    queue = new_queue(pl, "cancel")
    started, stopped = threading.Event(), threading.Event()
    checkpoints: list[int] = []

    def handler(job: JobContext) -> str:
        started.set()
        try:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                job.checkpoint(status=f"step {len(checkpoints)} ")
                checkpoints.append(1)
                time.sleep(0.1)
        except JobCancelled:
            stopped.set()
            raise
        return "ran to the end"

    descriptor = pl.enqueue_one(queue, b"long work", attempts_allowed=3)
    worker = Worker(pl, queue, handler, claim_timeout_s=30, idle_backoff=(0.05, 0.3))
    thread = worker.start()
    try:
        assert started.wait(WAIT_S), "the worker never ran the job"
        wait_for(lambda: len(checkpoints) >= 2, 10)
        with PinLaterClient(f"127.0.0.1:{server.port}", source="ops:alice") as operator:
            assert operator.cancel_jobs(queue, [descriptor], reason="wrong body") == [descriptor]
        assert stopped.wait(10), "the handler did not hear the cancel"
        wait_for(lambda: worker.processed == 1, 10)
    finally:
        worker.stop()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    info = pl.lookup([descriptor])[descriptor]
    assert info.state is JobState.FAILED
    assert info.attempts_remaining == 0
    assert info.custom_status.startswith("cancelled by ops:alice: wrong body; step ")
    actions = _history_actions(pl, descriptor)
    assert ("Cancelled", True, "ops:alice") in actions
    # Nothing the worker sent after the cancel applied (it sends no ack at all).
    after = actions[[a for a, _, _ in actions].index("Cancelled") + 1 :]
    assert all(not applied for _, applied, _ in after)


def test_pinledger_cancel_cancels_a_pending_job(pl: PinLaterClient, server: ServerProcess) -> None:
    queue = new_queue(pl, "cancelcli")
    waiting = pl.enqueue_one(queue, b"later", run_after_ms=int(time.time() * 1000) + 3_600_000)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pinledger",
            "cancel",
            queue,
            waiting,
            "--reason",
            "not needed",
            "--source",
            "ops:bob",
            "--server",
            f"127.0.0.1:{server.port}",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert result.returncode == 0, result.stderr
    assert f"cancelled      {waiting}" in result.stdout
    info = pl.lookup([waiting])[waiting]
    assert info.state is JobState.FAILED
    assert info.custom_status == "cancelled by ops:bob: not needed"
    assert ("Cancelled", True, "ops:bob") in _history_actions(pl, waiting)
