"""`pinledger worker`: the handler named on the command line, and the status port a
probe and a scrape read (the Worker against the in-memory queue server)."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pytest

from pinledger.client.errors import ClientError
from pinledger.client.job_context import JobContext
from pinledger.client.jobs import Ack, DequeuedJob
from pinledger.client.retry import constant
from pinledger.client.worker import Worker
from pinledger.client.worker.metrics import CATALOGUE, Reading, render
from pinledger.client.worker.runner import (
    HandlerSpecError,
    build_parser,
    child_arguments,
    load_handler,
    main,
)
from pinledger.client.worker.status import StatusServer, worker_routes
from tests.unit.queue_server import WAIT_S, Q, QueueServer, running, wait_until


def handle(job: JobContext) -> str:
    return "handled"


class Handlers:
    @staticmethod
    def ok(job: JobContext) -> str:
        return "ok"

    not_callable = 3


def test_a_handler_is_found_by_module_and_attribute_path() -> None:
    assert load_handler("tests.unit.test_worker_runner:handle") is handle
    assert load_handler("tests.unit.test_worker_runner:Handlers.ok") is Handlers.ok


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tests.unit.test_worker_runner", "is not MODULE:HANDLER"),
        (":handle", "is not MODULE:HANDLER"),
        ("tests.unit.test_worker_runner:", "is not MODULE:HANDLER"),
        ("no_such_module_here:handle", "cannot import 'no_such_module_here'"),
        ("tests.unit.test_worker_runner:Handlers.gone", "('gone' is missing)"),
        ("tests.unit.test_worker_runner:Handlers.not_callable", "is a int, not a function"),
    ],
)
def test_a_spec_that_names_no_function_is_refused_with_what_is_wrong(spec: str, says: str) -> None:
    with pytest.raises(HandlerSpecError, match=re.escape(says)):
        load_handler(spec)


def test_the_command_exits_2_with_the_reason_for_a_bad_handler_or_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["nothing:here", "--queue", "q"]) == 2
    assert "pinledger worker: cannot import 'nothing'" in capsys.readouterr().err
    spec = "tests.unit.test_worker_runner:handle"
    assert main([spec, "--queue", "q", "--concurrency", "0"]) == 2
    assert "concurrency must be at least 1, not 0" in capsys.readouterr().err


def test_processes_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tests.unit.test_worker_runner:handle", "--queue", "q", "--processes", "0"]) == 2
    assert "--processes must be at least 1, not 0" in capsys.readouterr().err


def test_each_child_of_processes_gets_the_options_but_the_supervisors_own() -> None:
    args = build_parser().parse_args(
        [
            *("m:f", "--queue", "q", "--servers", "a:1,b:2", "--concurrency", "3"),
            *("--processes", "4", "--status-port", "9102", "--status-host", "0.0.0.0"),
            *("--grace-s", "5", "--tls-cafile", "ca.pem", "-v"),
        ]
    )
    assert child_arguments(args) == [
        *("m:f", "--queue", "q", "--servers", "a:1,b:2", "--concurrency", "3"),
        *("--grace-s", "5.0", "--claim-timeout-s", "600.0", "--retry-s", "1.0"),
        *("--tls-cafile", "ca.pem", "--verbose"),
    ]
    again = build_parser().parse_args(child_arguments(args))
    assert (again.processes, again.status_port, again.batch_size) == (1, None, None)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as refused:
        return int(refused.code), refused.read().decode()


def _samples(text: str) -> dict[str, float]:
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


@contextmanager
def _status(worker: Worker) -> Iterator[StatusServer]:
    status = StatusServer(worker_routes(worker), "127.0.0.1", 0)
    status.start()
    try:
        yield status
    finally:
        status.stop()


def test_health_and_metrics_follow_the_worker_through_its_jobs_and_its_stop() -> None:
    server = QueueServer([b"ok", b"ok", b"boom"])

    def handler(job: JobContext) -> str:
        if job.body == b"boom":
            raise ValueError("no")
        return "done"

    worker = Worker(server, Q, handler, concurrency=2, batch_size=2, retry=constant(5))
    with _status(worker) as status:
        code, _ = _get(status.port, "/health")
        assert code == 503  # not dequeuing yet
        thread = worker.start()
        wait_until(lambda: len(server.succeeded) == 2 and len(server.failed) == 1)
        code, body = _get(status.port, "/health")
        assert code == 200
        seen = json.loads(body)
        assert seen["status"] == "ok" and seen["server"] == "answering"
        assert (seen["queue"], seen["processed"], seen["concurrency"]) == (Q, 3, 2)
        code, text = _get(status.port, "/metrics")
        assert code == 200
        samples = _samples(text)
        jobs = 'pinledger_worker_jobs_total{queue="q",outcome="%s"}'
        assert samples[jobs % "succeeded"] == 2
        assert samples[jobs % "retried"] == 1
        assert samples[jobs % "failed"] == samples[jobs % "released"] == 0
        assert samples['pinledger_worker_handler_seconds_count{queue="q"}'] == 3
        assert samples['pinledger_worker_handler_seconds_sum{queue="q"}'] >= 0
        assert samples['pinledger_worker_in_flight{queue="q"}'] == 0
        assert samples['pinledger_worker_server_answering{queue="q"}'] == 1
        for metric in CATALOGUE:
            assert f"# TYPE {metric.name} {metric.kind}" in text
        assert _get(status.port, "/elsewhere")[0] == 404
        worker.stop()
        thread.join(WAIT_S)
        code, body = _get(status.port, "/health")
        assert code == 503 and json.loads(body)["status"] == "stopping"


class Unreachable(QueueServer):
    def dequeue(
        self,
        queue: str,
        limit: int,
        *,
        succeeded: Iterable[Ack] = (),
        failed: Iterable[Ack] = (),
    ) -> list[DequeuedJob]:
        raise ClientError("cannot connect to 127.0.0.1:9010: connection refused")


def test_a_worker_whose_servers_do_not_answer_stays_up_and_says_why() -> None:
    worker = Worker(Unreachable([]), Q, handle, concurrency=1, batch_size=1)
    with _status(worker) as status, running(worker):
        wait_until(lambda: worker.failing is not None)
        code, body = _get(status.port, "/health")
        assert code == 200
        server = json.loads(body)["server"]
        assert server.startswith("dequeue failed: cannot connect to 127.0.0.1:9010")
        assert server.endswith("(no server has answered yet)")
        samples = _samples(_get(status.port, "/metrics")[1])
        assert samples['pinledger_worker_server_answering{queue="q"}'] == 0


def test_a_queue_name_is_escaped_in_its_label() -> None:
    reading = Reading('a"b\\c', {"succeeded": 1}, 0.5, 1, 0, True)
    text = render([reading])
    assert 'pinledger_worker_jobs_total{queue="a\\"b\\\\c",outcome="succeeded"} 1' in text


def test_the_status_thread_serves_while_the_handlers_run() -> None:
    """A probe is answered while every handler thread is busy."""
    started, finish = threading.Event(), threading.Event()

    def slow(job: JobContext) -> None:
        started.set()
        finish.wait(WAIT_S)

    worker = Worker(QueueServer([b"slow"]), Q, slow, concurrency=1, batch_size=1)
    with _status(worker) as status, running(worker):
        assert started.wait(WAIT_S)
        code, body = _get(status.port, "/health")
        finish.set()
    assert code == 200 and json.loads(body)["in_flight"] == 1
