"""Health that tells the truth, in the Kubernetes style.

- Liveness (`/health`): the process's background loops are alive and progressing. A
  loop that died or has not finished a round for `max_lag_s` fails it: restarting the
  process is the cure. A dependency that is down does not fail liveness (a restart
  would not bring Postgres back).
- Readiness (`/ready`): liveness, and every dependency answers: while Kafka or Postgres
  is down, the server cannot do its work and a load balancer should send calls
  elsewhere.

A monitor thread probes the dependencies every `interval_s` (a probe of a dead broker
may take the client's whole timeout, so the endpoints never wait on one) and keeps the
last result; the endpoints read it. Every round updates `pinledger_dependency_up` and
`pinledger_loop_lag_seconds` (catalogue.py says what they mean).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.service.observability import catalogue
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

UP = catalogue.DEPENDENCY_UP
# How much of a dependency's error /ready shows: room for a store's or Kafka's refusal
# line whole (what failed, why, what to check, the driver's words), bounded.
ERROR_CHARS = 600
LAG = catalogue.LOOP_LAG_SECONDS


@dataclass(frozen=True, slots=True)
class Loop:
    """A background loop: whether its thread runs, and the monotonic time of its last
    progress."""

    alive: Callable[[], bool]
    progressed_at: Callable[[], float]


class HealthMonitor:
    def __init__(
        self,
        probes: Mapping[str, Callable[[], object]],
        loops: Mapping[str, Loop],
        metrics: Metrics,
        clock: Clock = SYSTEM_CLOCK,
        interval_s: float = 2.0,
        max_lag_s: float = 60.0,
    ) -> None:
        self._probes = dict(probes)
        self._loops = dict(loops)
        self._metrics = metrics
        self._clock = clock
        self._interval_s = interval_s
        self._max_lag_s = max_lag_s
        self._lock = threading.Lock()
        # Until the first round: not known to be up.
        self._dependencies = {name: "not probed yet" for name in self._probes}
        self._stop = threading.Event()
        self._noise = RateLimitedLog(log, burst=5, window_s=60.0, clock=clock)

    def start(self) -> None:
        self.probe()
        threading.Thread(target=self._run, name="health", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._clock.sleep(self._interval_s, self._stop):
            try:
                self.probe()
            except Exception as exc:  # the monitor must outlive anything
                self._noise.warning("health round failed: %s: %s", type(exc).__name__, exc)

    def add_probe(self, name: str, probe: Callable[[], object]) -> None:
        """A dependency to probe from the next round on (a store shard added to the map)."""
        with self._lock:
            self._dependencies = {**self._dependencies, name: "not probed yet"}
        # Replaced, not changed in place: a round under way goes on with the old dict.
        self._probes = {**self._probes, name: probe}

    def probe(self) -> None:
        """One round: every dependency probed, every gauge updated."""
        results: dict[str, str] = {}
        for name, probe in self._probes.items():
            try:
                probe()
            except Exception as exc:
                results[name] = f"down: {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}"
            else:
                results[name] = "ok"
            self._metrics.set_gauge(UP, 1.0 if results[name] == "ok" else 0.0, dependency=name)
        with self._lock:
            changed = {n: r for n, r in results.items() if self._dependencies.get(n) != r}
            self._dependencies = results
        for name, result in changed.items():
            if result == "ok":
                log.info("dependency %s is up", name)
            else:
                self._noise.warning("dependency %s is %s", name, result)
        self.loops()

    def loops(self) -> dict[str, str]:
        """Each loop: "ok", or what is wrong with it (and the lag gauges)."""
        now = self._clock.monotonic()
        checks: dict[str, str] = {}
        for name, loop in self._loops.items():
            lag = max(0.0, now - loop.progressed_at())
            self._metrics.set_gauge(LAG, lag, loop=name)
            if not loop.alive():
                checks[f"loop:{name}"] = "stopped"
            elif lag > self._max_lag_s:
                checks[f"loop:{name}"] = f"no progress for {lag:.0f} s"
            else:
                checks[f"loop:{name}"] = "ok"
        return checks

    def progress(self) -> dict[str, float]:
        """Seconds since each loop last progressed."""
        now = self._clock.monotonic()
        return {
            name: round(max(0.0, now - loop.progressed_at()), 3)
            for name, loop in self._loops.items()
        }

    def liveness(self) -> dict[str, str]:
        return self.loops()

    def readiness(self) -> dict[str, str]:
        with self._lock:
            dependencies = dict(self._dependencies)
        return {**dependencies, **self.loops()}
