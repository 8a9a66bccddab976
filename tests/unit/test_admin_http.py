"""The admin port over real HTTP on an ephemeral port."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from pinledger.service.observability.admin_http import AdminHttpServer
from pinledger.service.observability.metrics import Metrics

Get = Callable[[str], tuple[int, str, str]]


@pytest.fixture
def checks() -> dict[str, Any]:
    return {"kafka": "ok", "postgres": "ok"}


@pytest.fixture
def get(checks: dict[str, Any]) -> Iterator[Get]:
    metrics = Metrics()
    metrics.count("pinledger_rpc_total", method="enqueueJobs")
    metrics.observe("pinledger_rpc_seconds", 0.003, method="enqueueJobs")

    def health() -> Mapping[str, str]:
        if "raise" in checks:
            raise RuntimeError(checks["raise"])
        return checks

    server = AdminHttpServer("127.0.0.1", 0, metrics, health)
    server.start()

    def fetch(path: str) -> tuple[int, str, str]:
        url = f"http://127.0.0.1:{server.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.headers["Content-Type"], r.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.headers["Content-Type"], e.read().decode()

    yield fetch
    server.stop()


def test_metrics(get: Get) -> None:
    status, content_type, body = get("/metrics")
    assert (status, content_type) == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert 'pinledger_rpc_total{method="enqueueJobs"} 1\n' in body
    assert 'pinledger_rpc_seconds_count{method="enqueueJobs"} 1\n' in body


def test_stats_txt(get: Get) -> None:
    status, _, body = get("/stats.txt")
    assert status == 200
    assert body.startswith("counters:\n  pinledger_rpc_total{method=enqueueJobs}: 1\n")
    assert "pinledger_rpc_seconds{method=enqueueJobs}: (count=1," in body


def test_health_ok(get: Get) -> None:
    status, content_type, body = get("/health")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {"status": "ok", "checks": {"kafka": "ok", "postgres": "ok"}}


def test_health_failing_check(get: Get, checks: dict[str, Any]) -> None:
    checks["postgres"] = "connection refused"
    status, _, body = get("/health")
    assert status == 503
    assert json.loads(body)["status"] == "failing"
    assert json.loads(body)["checks"]["postgres"] == "connection refused"


def test_health_that_raises(get: Get, checks: dict[str, Any]) -> None:
    checks["raise"] = "pool exhausted"
    status, _, body = get("/health")
    assert status == 503
    assert "pool exhausted" in json.loads(body)["error"]


def test_ready_and_progress() -> None:
    def ready() -> Mapping[str, str]:
        return {"kafka": "down: LogError: cannot reach Kafka", "loop:owner": "ok"}

    server = AdminHttpServer(
        "127.0.0.1", 0, Metrics(), lambda: {"loop:owner": "ok"}, ready, lambda: {"owner": 0.25}
    )
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=5) as r:
            assert r.status == 200
            assert json.loads(r.read())["progress"] == {"owner": 0.25}
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/ready", timeout=5)
            raise AssertionError("/ready answered 200 with Kafka down")
        except urllib.error.HTTPError as e:
            with e:
                assert e.code == 503
                body = json.loads(e.read())
        assert body["status"] == "failing"
        assert body["checks"]["kafka"].startswith("down: LogError")
    finally:
        server.stop()


def test_unknown_path(get: Get) -> None:
    assert get("/nope")[0] == 404


def test_stop_without_start_does_not_hang() -> None:
    server = AdminHttpServer("127.0.0.1", 0, Metrics(), dict)
    assert server.port > 0
    server.stop()


def test_ready_names_paused_partitions_and_stays_ready() -> None:
    """A partition paused at a record its store refuses is named with what to do, and
    the server stays ready: its other partitions serve, and another server would stall
    on the same record (decision 0032)."""
    paused = {"mail[0]": "paused at offset 7: ...; skip the record: pinledger skip-record"}
    server = AdminHttpServer(
        "127.0.0.1", 0, Metrics(), lambda: {"loop:owner": "ok"}, paused=lambda: paused
    )
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/ready", timeout=5) as r:
            assert r.status == 200
            body = json.loads(r.read())
        assert body["status"] == "ok"
        assert body["paused"] == paused
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=5) as r:
            assert "paused" not in json.loads(r.read())
    finally:
        server.stop()
