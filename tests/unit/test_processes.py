"""`serve --processes N`, the pure parts: what each worker is started with, when one
that exited is started again or given up on, the host's one admin port put together
from its workers', and the forwarded dequeues counted."""

from __future__ import annotations

import pytest

from pinledger.exposition import label_prometheus, merge_prometheus
from pinledger.idl import pinlater
from pinledger.ledger.fake_clock import FakeClock
from pinledger.service.api.forwarding import FORWARDED_JOBS, FORWARDS, CountingPeerPool
from pinledger.service.api.requests import DequeueRequest
from pinledger.service.config import Config, ConfigError
from pinledger.service.observability.metrics import Metrics
from pinledger.service.processes.merge import WorkerView, host_health, merge_stats_txt
from pinledger.service.processes.plan import (
    RestartPolicy,
    Restarts,
    WorkerSpec,
    peer_port_of,
    worker_env,
    worker_server_id,
)
from pinledger.service.processes.supervisor import worker_command


def test_a_worker_serves_alone_on_its_own_ports_whatever_the_supervisor_had() -> None:
    spec = WorkerSpec(index=1, peer_port=9101, admin_port=9201, server_id="h:7/1")
    env = worker_env({"PINLEDGER_PROCESSES": "2", "PINLEDGER_KAFKA": "k:1"}, spec)
    assert env["PINLEDGER_PROCESSES"] == "1"
    assert (env["PINLEDGER_PEER_PORT"], env["PINLEDGER_ADMIN_PORT"]) == ("9101", "9201")
    assert env["PINLEDGER_SERVER_ID"] == "h:7/1" and env["PINLEDGER_KAFKA"] == "k:1"
    config = Config.from_env(env)
    assert config.processes == 1 and config.peer_port == 9101


def test_workers_have_distinct_ids_and_peer_ports() -> None:
    assert worker_server_id("h:7", 0) != worker_server_id("h:7", 1)
    assert [peer_port_of(9100, i, pick=0) for i in range(3)] == [9100, 9101, 9102]
    assert peer_port_of(0, 2, pick=40123) == 40123  # no base: a port the OS picked


def test_the_worker_command_names_its_index_and_supervisor() -> None:
    command = worker_command(3, verbose=True)
    assert command[command.index("--worker") + 1] == "3"
    assert "-v" in command and "serve" in command and "--supervisor" in command


def test_a_peer_port_is_what_peers_are_told() -> None:
    config = Config.from_env({"PINLEDGER_PORT": "9010", "PINLEDGER_PEER_PORT": "9111"})
    assert config.address == "127.0.0.1:9111"
    assert Config.from_env({"PINLEDGER_PORT": "9010"}).address == "127.0.0.1:9010"


def test_processes_and_peer_port_are_checked() -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        Config.from_env({"PINLEDGER_PROCESSES": "0"})
    with pytest.raises(ConfigError, match="TCP port"):
        Config.from_env({"PINLEDGER_PEER_PORT": "70000"})


def test_restarts_back_off_then_give_up_on_a_worker_that_keeps_failing() -> None:
    restarts = Restarts(RestartPolicy(first_delay_s=1, max_delay_s=5, give_up_after=5))
    delays = [restarts.exited(ran_for_s=0.5) for _ in range(4)]
    assert delays == [1.0, 2.0, 4.0, 5.0]
    assert restarts.exited(ran_for_s=0.5) is None
    assert restarts.total == 4


def test_a_worker_that_ran_a_while_starts_its_failures_afresh() -> None:
    restarts = Restarts(RestartPolicy(first_delay_s=1, stable_after_s=30, give_up_after=3))
    assert restarts.exited(1) == 1.0
    assert restarts.exited(1) == 2.0
    assert restarts.exited(3600) == 1.0  # it had run fine: not the third failure in a row
    assert restarts.exited(1) == 2.0
    assert restarts.exited(1) is None


def test_a_sample_gets_the_process_label() -> None:
    assert label_prometheus('a_total{x="1"} 3', 'process="0"') == 'a_total{process="0",x="1"} 3'
    assert label_prometheus("a_total 3", 'process="1"') == 'a_total{process="1"} 3'


def test_metrics_of_the_workers_are_one_exposition_each_family_once() -> None:
    zero = '# TYPE a_total counter\na_total{q="x"} 1\n# TYPE g gauge\ng 2\n'
    one = (
        '# TYPE a_total counter\na_total{q="x"} 5\n# TYPE h_seconds histogram\nh_seconds_count 1\n'
    )
    merged = merge_prometheus({1: one, 0: zero}).splitlines()
    assert merged.count("# TYPE a_total counter") == 1
    family = merged[merged.index("# TYPE a_total counter") + 1 :][:2]
    assert family == ['a_total{process="0",q="x"} 1', 'a_total{process="1",q="x"} 5']
    assert 'g{process="0"} 2' in merged and 'h_seconds_count{process="1"} 1' in merged


def test_the_merged_metrics_keep_each_familys_help_once() -> None:
    """HELP comes through the supervisor (once per family, before its TYPE), so a host
    of several processes documents its metrics as one process does."""
    zero = "# HELP a_total What a counts.\n# TYPE a_total counter\na_total 1\n"
    one = zero.replace("a_total 1", "a_total 2") + "# HELP g A gauge.\n# TYPE g gauge\ng 3\n"
    assert merge_prometheus({0: zero, 1: one}).splitlines() == [
        "# HELP a_total What a counts.",
        "# TYPE a_total counter",
        'a_total{process="0"} 1',
        'a_total{process="1"} 2',
        "# HELP g A gauge.",
        "# TYPE g gauge",
        'g{process="1"} 3',
    ]


def test_stats_txt_of_the_workers_section_by_section() -> None:
    zero = "counters:\n  a_total{q=x}: 1\ngauges:\n  g: 2\nmetrics:\n"
    one = "counters:\n  a_total{q=x}: 5\ngauges:\nmetrics:\n  h: (count=1)\n"
    assert merge_stats_txt({0: zero, 1: one}).splitlines() == [
        "counters:",
        "  a_total{process=0,q=x}: 1",
        "  a_total{process=1,q=x}: 5",
        "gauges:",
        "  g{process=0}: 2",
        "metrics:",
        "  h{process=1}: (count=1)",
    ]


def _views(pids: list[int | None]) -> list[WorkerView]:
    return [WorkerView(i, pid, 9200 + i, 9100 + i, 0) for i, pid in enumerate(pids)]


def test_the_host_is_healthy_only_when_every_process_is() -> None:
    code, body = host_health(_views([11, 12]), {0: (200, "ok"), 1: (200, "ok")})
    assert code == 200 and body["status"] == "ok"
    code, body = host_health(_views([11, None]), {0: (200, "ok")})
    assert code == 503
    assert body["checks"] == {"process-0": "ok", "process-1": "not running (being restarted)"}
    code, body = host_health(_views([11, 12]), {0: (200, "ok"), 1: (503, "HTTP 503: kafka")})
    assert code == 503 and body["checks"]["process-1"] == "HTTP 503: kafka"  # type: ignore[index]


class _Peer:
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.closed = False

    def dequeueOwned(self, context: object, request: object) -> object:  # noqa: N802 (the IDL)
        if self.jobs < 0:
            raise ConnectionError("gone")
        return pinlater.PinLaterDequeueResponse(jobs={f"d{i}": b"" for i in range(self.jobs)})

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(("jobs", "outcome"), [(3, "jobs"), (0, "empty"), (-1, "failed")])
def test_each_forwarded_dequeue_is_counted_with_what_it_brought(jobs: int, outcome: str) -> None:
    metrics = Metrics()
    pool = CountingPeerPool(metrics)
    pool._client = lambda address: _Peer(jobs)  # type: ignore[method-assign]
    request = DequeueRequest(queue="q", limit=5, dry_run=False, coverage=1.0)
    try:
        pool.dequeue("127.0.0.1:1", None, request, 5)
    except ConnectionError:
        assert outcome == "failed"
    assert metrics.snapshot_counter(FORWARDS, outcome=outcome) == 1
    assert metrics.snapshot_counter(FORWARDED_JOBS) == max(jobs, 0)


def test_a_peer_that_had_nothing_is_not_asked_again_until_the_quiet_time_ends() -> None:
    metrics = Metrics()
    clock = FakeClock()
    pool = CountingPeerPool(metrics, quiet_s=0.01, clock=clock)
    peer = _Peer(0)
    asked: list[str] = []

    def client(address: str) -> _Peer:
        asked.append(address)
        return peer

    pool._client = client  # type: ignore[method-assign]
    request = DequeueRequest(queue="q", limit=5, dry_run=False, coverage=1.0)
    assert pool.dequeue("a:1", None, request, 5).jobs == {}
    assert pool.dequeue("a:1", None, request, 5).jobs == {}  # quiet: not asked
    other = DequeueRequest(queue="other", limit=5, dry_run=False, coverage=1.0)
    pool.dequeue("a:1", None, other, 5)  # another queue is asked
    assert asked == ["a:1", "a:1"]
    assert metrics.snapshot_counter(FORWARDS, outcome="quiet") == 1
    clock.advance(0.011)
    peer.jobs = 2
    assert len(pool.dequeue("a:1", None, request, 5).jobs) == 2  # asked again
    assert len(pool.dequeue("a:1", None, request, 5).jobs) == 2  # it had jobs: asked
    assert len(asked) == 4


def test_the_quiet_time_can_be_switched_off() -> None:
    pool = CountingPeerPool(Metrics(), quiet_s=0)
    asked: list[str] = []

    def client(address: str) -> _Peer:
        asked.append(address)
        return _Peer(0)

    pool._client = client  # type: ignore[method-assign]
    request = DequeueRequest(queue="q", limit=5, dry_run=False, coverage=1.0)
    pool.dequeue("a:1", None, request, 5)
    pool.dequeue("a:1", None, request, 5)
    assert len(asked) == 2


def test_a_sample_with_empty_braces_gets_the_label_alone() -> None:
    assert label_prometheus("a_total{} 3", 'process="0"') == 'a_total{process="0"} 3'
