"""observability/health.py: liveness is the loops, readiness the loops and the
dependencies; the gauges follow every round."""

from __future__ import annotations

from pinledger.ledger.fake_clock import FakeClock
from pinledger.service.observability.health import LAG, UP, HealthMonitor, Loop
from pinledger.service.observability.metrics import Metrics


class Dependency:
    def __init__(self) -> None:
        self.error: Exception | None = None

    def __call__(self) -> None:
        if self.error is not None:
            raise self.error


def _monitor() -> tuple[HealthMonitor, Dependency, dict[str, float | bool], FakeClock, Metrics]:
    clock = FakeClock()
    postgres = Dependency()
    owner: dict[str, float | bool] = {"alive": True, "at": clock.monotonic()}
    metrics = Metrics()
    monitor = HealthMonitor(
        probes={"postgres": postgres},
        loops={"owner": Loop(lambda: bool(owner["alive"]), lambda: float(owner["at"]))},
        metrics=metrics,
        clock=clock,
        max_lag_s=60,
    )
    return monitor, postgres, owner, clock, metrics


def test_all_well() -> None:
    monitor, _, _, _, metrics = _monitor()
    monitor.probe()
    assert monitor.liveness() == {"loop:owner": "ok"}
    assert monitor.readiness() == {"postgres": "ok", "loop:owner": "ok"}
    assert metrics.snapshot_gauge(UP, dependency="postgres") == 1


def test_a_dependency_down_fails_readiness_not_liveness() -> None:
    monitor, postgres, _, _, metrics = _monitor()
    postgres.error = ConnectionRefusedError("connection refused")
    monitor.probe()
    assert monitor.liveness() == {"loop:owner": "ok"}
    ready = monitor.readiness()
    assert ready["postgres"] == "down: ConnectionRefusedError: connection refused"
    assert metrics.snapshot_gauge(UP, dependency="postgres") == 0
    postgres.error = None
    monitor.probe()
    assert monitor.readiness()["postgres"] == "ok"


def test_nothing_is_ready_before_the_first_probe() -> None:
    monitor, _, _, _, _ = _monitor()
    assert monitor.readiness()["postgres"] == "not probed yet"


def test_a_stuck_or_stopped_loop_fails_liveness() -> None:
    monitor, _, owner, clock, metrics = _monitor()
    clock.advance(61)
    assert monitor.liveness() == {"loop:owner": "no progress for 61 s"}
    assert metrics.snapshot_gauge(LAG, loop="owner") == 61
    owner["at"] = clock.monotonic()
    assert monitor.liveness() == {"loop:owner": "ok"}
    owner["alive"] = False
    assert monitor.liveness() == {"loop:owner": "stopped"}
    assert monitor.progress() == {"owner": 0.0}


def test_a_probe_added_later_is_reported_from_then_on() -> None:
    """A store shard added to the shard map is probed from the next round on."""
    monitor, _, _, _, metrics = _monitor()
    monitor.probe()
    shard = Dependency()
    shard.error = ConnectionRefusedError("refused")
    monitor.add_probe("mysql:c", shard)
    assert monitor.readiness()["mysql:c"] == "not probed yet"
    monitor.probe()
    assert monitor.readiness()["mysql:c"] == "down: ConnectionRefusedError: refused"
    assert metrics.snapshot_gauge(UP, dependency="mysql:c") == 0
