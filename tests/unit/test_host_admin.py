"""The host's one admin port of `serve --processes`, over real HTTP on ephemeral ports:
two workers' admin ports (the real AdminHttpServer) behind the supervisor's."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from pinledger.service.observability.admin_http import AdminHttpServer
from pinledger.service.observability.metrics import Metrics
from pinledger.service.observability.web import WebRequest, WebResponse
from pinledger.service.processes.admin import HostAdminServer
from pinledger.service.processes.merge import WorkerView


@dataclass
class Host:
    port: int
    checks: list[dict[str, str]]
    running: list[bool] = field(default_factory=lambda: [True, True])
    # What each worker's /ready names as paused (decision 0032).
    paused: list[dict[str, str]] = field(default_factory=lambda: [{}, {}])

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as failing:
            return failing.code, failing.read().decode()


def _page(index: int) -> object:
    def pages(request: WebRequest) -> WebResponse:
        return WebResponse(200, "text/plain", f"page {request.path} from {index}".encode())

    return pages


@pytest.fixture
def host() -> Iterator[Host]:
    checks = [{"owner": "ok"}, {"owner": "ok"}]
    paused: list[dict[str, str]] = [{}, {}]
    workers = []
    for index in range(2):
        metrics = Metrics()
        metrics.count("pinledger_rpc_total", 1 + index, method="dequeueJobs")
        metrics.set_gauge("pinledger_owned_partitions", 2)
        worker = AdminHttpServer(
            "127.0.0.1",
            0,
            metrics,
            lambda i=index: checks[i],  # type: ignore[misc]
            pages=_page(index),  # type: ignore[arg-type]
            paused=lambda i=index: paused[i],  # type: ignore[misc]
        )
        worker.start()
        workers.append(worker)
    box: list[Host] = []

    def views() -> list[WorkerView]:
        return [
            WorkerView(i, 100 + i if box[0].running[i] else None, w.port, 9100 + i, 0)
            for i, w in enumerate(workers)
        ]

    admin = HostAdminServer("127.0.0.1", 0, views, "127.0.0.1")
    admin.start()
    box.append(Host(admin.port, checks, paused=paused))
    yield box[0]
    admin.stop()
    for worker in workers:
        worker.stop()


def test_one_scrape_has_every_process_labelled(host: Host) -> None:
    status, text = host.get("/metrics")
    assert status == 200
    lines = text.splitlines()
    assert lines.count("# TYPE pinledger_rpc_total counter") == 1
    assert 'pinledger_rpc_total{process="0",method="dequeueJobs"} 1' in lines
    assert 'pinledger_rpc_total{process="1",method="dequeueJobs"} 2' in lines
    assert 'pinledger_owned_partitions{process="1"} 2' in lines
    status, text = host.get("/stats.txt")
    assert status == 200 and "  pinledger_rpc_total{process=1,method=dequeueJobs}: 2" in text


def test_health_is_ok_only_while_every_process_is(host: Host) -> None:
    status, text = host.get("/health")
    assert status == 200 and json.loads(text)["status"] == "ok"
    host.checks[1]["owner"] = "stalled for 30 s"
    status, text = host.get("/health")
    body = json.loads(text)
    assert status == 503
    assert body["checks"] == {
        "process-0": "ok",
        "process-1": "HTTP 503: owner: stalled for 30 s",
    }
    assert body["processes"]["1"]["peer_port"] == 9101


def test_a_process_being_restarted_fails_the_health_and_its_page_moves(host: Host) -> None:
    assert host.get("/queues") == (200, "page /queues from 0")
    host.running[0] = False
    status, text = host.get("/ready")
    assert status == 503
    assert json.loads(text)["checks"]["process-0"] == "not running (being restarted)"
    assert host.get("/queues") == (200, "page /queues from 1")


def test_the_host_ready_names_every_process_paused_partition_and_stays_ready(host: Host) -> None:
    host.paused[1]["mail[0]"] = "paused at offset 7: ...; skip the record: ..."
    status, text = host.get("/ready")
    assert status == 200
    assert json.loads(text)["paused"] == {
        "mail[0]": "paused at offset 7: ...; skip the record: ..."
    }
    assert "paused" not in json.loads(host.get("/health")[1])
