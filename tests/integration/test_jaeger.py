"""pinledger's traces in a real viewer (issue 26, part 4): Jaeger, built from the Go
module proxy at a pinned version and run on loopback (tests/integration/jaeger.py), gets
the spans of a server and of the example worker, both set up by the standard OTEL_*
variables alone, while jobs succeed, fail and are retried, and fail for good; then
`pinledger trace --otlp` exports a finished job's life. What Jaeger's API answers is
what its UI shows:

- both services are there: the worker traces out of the box;
- a job's worker runs are found by its descriptor, one `process` span per attempt, in
  the trace of the job's enqueue, as children of the enqueue call;
- the server's span that applied the failure ending a job is an error naming it;
- no empty poll is a trace of its own;
- the exported life hangs together: attempts are children of the job's span, the
  failed attempt is an error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
            OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.endpoint, OTEL_SERVICE_NAME="pinledger", **OTEL_FAST
        ),
    )
    queue = f"jg_{uuid.uuid4().hex[:8]}"
    server.start(tmp_path)
    try:
        with PinLaterClient(f"127.0.0.1:{server.port}") as client:
            client.create_queue(queue)
            descriptors = client.enqueue(queue, thumbnail_jobs(JOBS, delayed_s=0))
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
        exported = run_pinledger(
            "trace",
            broken,
            "--otlp",
            "--server",
            f"127.0.0.1:{server.port}",
            OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.endpoint,
        )
        assert exported.returncode == 0, exported.stderr
    finally:
        server.stop()  # flushes the server's last spans

    wait_for(lambda: {"pinledger", "pinledger-worker"} <= set(jaeger.services()), timeout=30)
    _worker_runs_are_in_the_jobs_enqueue_trace(jaeger, queue, broken)
    _the_failure_that_ended_it_is_an_error(jaeger, queue, broken)
    _no_empty_poll_is_a_trace(jaeger)
    _the_exported_life_hangs_together(jaeger, broken)


def _worker_runs_are_in_the_jobs_enqueue_trace(jaeger: jg.Jaeger, queue: str, job: str) -> None:
    def found() -> list[dict[str, Any]]:
        traces = jaeger.traces("pinledger-worker", **{"messaging.message.id": job})
        runs = [
            s for t in traces for s in jg.spans_of(t) if jg.tag(s, "messaging.message.id") == job
        ]
        return traces if len(runs) >= 3 else []

    (trace,) = wait_for(found, timeout=30)
    spans = jg.spans_of(trace)
    # The batch's other jobs are in this trace too (one enqueue call: one trace).
    runs = [
        s
        for s in spans
        if s["operationName"] == f"process {queue}" and jg.tag(s, "messaging.message.id") == job
    ]
    assert sorted(jg.tag(s, "pinledger.attempt") for s in runs) == [1, 2, 3]
    (enqueue,) = [s for s in spans if s["operationName"] == "pinlater/enqueueJobs"]
    assert jg.service_of(trace, enqueue) == "pinledger"
    assert all(jg.parent_of(s) == enqueue["spanID"] for s in runs)


def _the_failure_that_ended_it_is_an_error(jaeger: jg.Jaeger, queue: str, job: str) -> None:
    operation = f"pinledger apply {queue}"

    def errors() -> list[dict[str, Any]]:
        found = jaeger.get("/api/traces", service="pinledger", operation=operation, limit="1000")
        return [
            s
            for t in found.get("data") or []
            for s in jg.spans_of(t)
            if s["operationName"] == operation
            and jg.tag(s, "otel.status_code") == "ERROR"
            and job in str(jg.tag(s, "otel.status_description"))
        ]

    (applied,) = wait_for(errors, timeout=30)
    assert jg.tag(applied, "error") is True
    assert job in str(jg.tag(applied, "pinledger.descriptors"))


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


def _the_exported_life_hangs_together(jaeger: jg.Jaeger, job: str) -> None:
    def exported() -> list[dict[str, Any]]:
        traces = jaeger.traces("pinledger", **{"pinledger.descriptor": job})
        return [s for t in traces for s in jg.spans_of(t)]

    spans = wait_for(exported, timeout=30)
    (life,) = [s for s in spans if s["operationName"].startswith("job ")]
    attempts = sorted(
        (s for s in spans if s["operationName"].startswith("attempt ")),
        key=lambda s: str(s["operationName"]),
    )
    assert [s["operationName"] for s in attempts] == ["attempt 1", "attempt 2", "attempt 3"]
    assert all(jg.parent_of(s) == life["spanID"] for s in attempts)
    assert jg.tag(attempts[-1], "error") is True
