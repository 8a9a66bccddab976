"""pinledger's traces in a real viewer (issue 26, part 4): Jaeger, built from the Go
module proxy at a pinned version and run on loopback (tests/integration/jaeger.py), gets
the spans of a server and of the example worker, both set up by the standard OTEL_*
variables alone, while jobs fail and are retried, fail for good, and time out; then
`pinledger trace --otlp` exports a finished job's life again. What Jaeger's API answers
is what its UI shows:

- both services are there: the worker traces out of the box;
- searching a job's descriptor finds one trace, the job's own, drawn live: the job's
  span at its root (an error when the job failed for good), its `create` span, one
  `attempt N` span per claim (errors saying why: the worker's message, or the
  timeout), and the worker's `process` span inside its attempt;
- no span starts before its parent or ends after it, and Jaeger warns of nothing;
- exporting the finished job again changes nothing Jaeger shows;
- no empty poll is a trace of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.examples.enqueue_jobs import thumbnail_jobs
from pinledger.service.testing.servers import ServerProcess, run_pinledger, wait_for
from tests.integration import jaeger as jg
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration

# Job 24 of thumbnail_jobs is a corrupt image: three attempts, all failed.
JOBS = 25
OTEL_FAST = {"OTEL_BSP_SCHEDULE_DELAY": "100"}


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jg.Jaeger]:
    with jg.running(tmp_path_factory.mktemp("jaeger")) as running:
        yield running


def _worker(server: ServerProcess, queue: str, jaeger: jg.Jaeger, log: Path) -> Any:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pinledger.client.examples.thumbnail_worker",
                "--servers",
                f"127.0.0.1:{server.port}",
                "--queue",
                queue,
            ],
            cwd=log.parent,
            env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.endpoint, **OTEL_FAST},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_a_jobs_life_in_jaeger(jaeger: jg.Jaeger, names: tuple[str, str], tmp_path: Path) -> None:
    prefix, schema = names
    server = ServerProcess(
        prefix=prefix,
        schema=schema,
        settings=server_settings(
            OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.endpoint,
            OTEL_SERVICE_NAME="pinledger",
            PINLEDGER_CLAIM_TIMEOUT_S="2",
            **OTEL_FAST,
        ),
    )
    queue = f"jg_{uuid.uuid4().hex[:8]}"
    jobs = thumbnail_jobs(JOBS, delayed_s=0)
    server.start(tmp_path)
    try:
        with PinLaterClient(f"127.0.0.1:{server.port}") as client:
            client.create_queue(queue)
            # A job whose first claim times out: taken by a worker that never acks.
            (late,) = client.enqueue(queue, jobs[:1])
            wait_for(lambda: bool(client.dequeue(queue, 1)), timeout=30)
            wait_for(lambda: client.lookup([late])[late].state.name == "PENDING", timeout=30)
            descriptors = [late, *client.enqueue(queue, jobs[1:])]
            broken = descriptors[24]
            worker = _worker(server, queue, jaeger, tmp_path / "worker.log")
            try:

                def all_done() -> bool:
                    states = {info.state.name for info in client.lookup(descriptors).values()}
                    return states <= {"SUCCEEDED", "FAILED"}

                wait_for(all_done, timeout=90, pause=0.5)
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=60)
        failed_for_good = _the_jobs_own_trace(jaeger, queue, broken, attempts=3)
        _check_failed_for_good(failed_for_good)
        _check_timed_out_then_done(_the_jobs_own_trace(jaeger, queue, late, attempts=2))
        _exporting_again_changes_nothing(jaeger, server, broken, failed_for_good)
    finally:
        server.stop()
    assert {"pinledger", "pinledger-worker"} <= set(jaeger.services())
    _no_empty_poll_is_a_trace(jaeger)


def _the_jobs_own_trace(jaeger: jg.Jaeger, queue: str, job: str, attempts: int) -> dict[str, Any]:
    """The one trace a search for the job's descriptor finds, once complete (drawn
    live: the server is still running), checked for its tree and times."""

    def complete() -> list[dict[str, Any]]:
        # A search by messaging.message.id also finds the dequeue calls that claimed
        # the job (their claim spans name it); pinledger.descriptor only the job's own.
        traces = jaeger.traces("pinledger", **{"pinledger.descriptor": job})
        names = {s["operationName"] for t in traces for s in jg.spans_of(t)}
        return traces if {f"job {job}", f"attempt {attempts}"} <= names else []

    (trace,) = wait_for(complete, timeout=30)
    assert isinstance(trace, dict)
    spans = jg.spans_of(trace)
    by_id = {s["spanID"]: s for s in spans}
    (life,) = [s for s in spans if jg.parent_of(s) is None]
    assert life["operationName"] == f"job {job}"
    assert jg.service_of(trace, life) == "pinledger"
    assert jg.tag(life, "messaging.destination.name") == queue
    assert jg.tag(life, "pinledger.descriptor") == job
    (create,) = [s for s in spans if s["operationName"] == f"create {queue}"]
    assert jg.parent_of(create) == life["spanID"]
    tries = _attempts(trace)
    assert [s["operationName"] for s in tries] == [f"attempt {n + 1}" for n in range(attempts)]
    assert all(jg.parent_of(s) == life["spanID"] for s in tries)
    assert all(jg.tag(s, "messaging.message.id") == job for s in spans)
    # Every span within its parent's time; nothing Jaeger would warn about.
    for span in spans:
        assert not span.get("warnings"), (span["operationName"], span["warnings"])
        parent = by_id.get(jg.parent_of(span) or "")
        if parent is not None:
            assert parent["startTime"] <= span["startTime"], span["operationName"]
            end, parent_end = (s["startTime"] + s["duration"] for s in (span, parent))
            assert end <= parent_end, span["operationName"]
    return trace


def _attempts(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(
        (s for s in jg.spans_of(trace) if s["operationName"].startswith("attempt ")),
        key=lambda s: int(jg.tag(s, "pinledger.attempt")),
    )


def _runs(trace: dict[str, Any], queue: str) -> dict[str, dict[str, Any]]:
    """The worker's `process` spans, by the attempt span they are in."""
    runs = [s for s in jg.spans_of(trace) if s["operationName"] == f"process {queue}"]
    assert all(jg.service_of(trace, s) == "pinledger-worker" for s in runs)
    return {str(jg.parent_of(s)): s for s in runs}


def _life(trace: dict[str, Any]) -> tuple[dict[str, Any], str]:
    (life,) = [s for s in jg.spans_of(trace) if jg.parent_of(s) is None]
    return life, str(jg.tag(life, "messaging.destination.name"))


def _check_failed_for_good(trace: dict[str, Any]) -> None:
    """A corrupt image: three attempts, each failed with the worker's message and run
    by the worker inside it; the job's span an error."""
    life, queue = _life(trace)
    runs = _runs(trace, queue)
    for attempt in _attempts(trace):
        assert jg.tag(attempt, "error") is True
        assert "not a JPEG file" in str(jg.tag(attempt, "otel.status_description"))
        run = runs[attempt["spanID"]]  # the worker's run is inside this attempt
        assert jg.tag(run, "pinledger.attempt") == jg.tag(attempt, "pinledger.attempt")
    assert jg.tag(life, "error") is True
    assert jg.tag(life, "pinledger.final_state") == "FAILED"
    assert "failed for good" in str(jg.tag(life, "otel.status_description"))


def _check_timed_out_then_done(trace: dict[str, Any]) -> None:
    """A claim that ran out (no worker span: that worker never acked), then a run that
    succeeded."""
    life, queue = _life(trace)
    lost, done = _attempts(trace)
    assert jg.tag(lost, "error") is True
    assert str(jg.tag(lost, "otel.status_description")).startswith("timed out")
    assert jg.tag(done, "error") is None
    assert set(_runs(trace, queue)) == {done["spanID"]}
    assert jg.tag(life, "error") is None
    assert jg.tag(life, "pinledger.final_state") == "SUCCEEDED"


def _exporting_again_changes_nothing(
    jaeger: jg.Jaeger, server: ServerProcess, job: str, before: dict[str, Any]
) -> None:
    exported = run_pinledger(
        "trace",
        job,
        "--otlp",
        "--server",
        f"127.0.0.1:{server.port}",
        OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.endpoint,
    )
    assert exported.returncode == 0, exported.stderr
    assert str(before["traceID"]) in exported.stdout  # the same trace

    def shown(trace: dict[str, Any]) -> list[tuple[str, str, int, int]]:
        return sorted(
            (s["spanID"], s["operationName"], s["startTime"], s["duration"])
            for s in jg.spans_of(trace)
        )

    time.sleep(1)  # what the export sent has arrived (Jaeger batches for 100 ms)
    (after,) = jaeger.traces("pinledger", **{"pinledger.descriptor": job})
    assert shown(after) == shown(before)


def _no_empty_poll_is_a_trace(jaeger: jg.Jaeger) -> None:
    found = jaeger.get(
        "/api/traces", service="pinledger", operation="pinlater/dequeueJobs", limit="1000"
    )
    polls = [
        s
        for t in found.get("data") or []
        for s in jg.spans_of(t)
        if s["operationName"] == "pinlater/dequeueJobs" and jg.parent_of(s) is None
    ]
    assert polls, "no dequeue reached Jaeger"
    assert all(int(jg.tag(s, "pinledger.jobs_out") or 0) > 0 for s in polls)
