"""Forwarded dequeues: counted, and not repeated at a peer that just had nothing.

With `serve --processes N` a dequeue that lands on a process whose partitions are empty
forwards; on an empty queue every poll of every worker would become one round trip to
each other owner, each answered "nothing" (measured: 32,005 of 35,236 dequeues one
process received in a benchmark run forwarded, and came back empty). So a peer that
answered nothing for a queue is not asked again for that queue for `quiet_s` (the
answer is then the empty one it gave); any forward that brings jobs, or the end of the
quiet time, asks it again. What that costs: a job enqueued on that peer's partitions
within the quiet time reaches this process's pollers up to `quiet_s` later (the peer's
own pollers see it at once) (docs/decisions/0019-processes.md).

What is counted (`pinledger_forwarded_dequeues_total{outcome}`,
`pinledger_forwarded_jobs_total`, `pinledger_forward_seconds`) is in the metrics
catalogue (service/observability/catalogue.py).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.service.api.convert import dequeue_response, dequeued_count
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.requests import Caller, DequeueRequest
from pinledger.service.config import Config
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics
from pinledger.service.security import tls

FORWARDS = catalogue.FORWARDED_DEQUEUES_TOTAL
FORWARDED_JOBS = catalogue.FORWARDED_JOBS_TOTAL
FORWARD_SECONDS = catalogue.FORWARD_SECONDS
# Long enough to turn a hot poll loop's forwards into a trickle (at most 1 / quiet_s
# per queue and peer), short against a worker's wait for its next job.
DEFAULT_QUIET_S = 0.01


class CountingPeerPool(PeerPool):
    @classmethod
    def of(cls, config: Config, metrics: Metrics) -> CountingPeerPool:
        """A server's pool: a forward is waited for Config.forward_timeout_s, which
        outlasts the peer's longest claim append."""
        return cls(
            metrics,
            quiet_s=config.forward_quiet_ms / 1000,
            timeout_ms=round(config.forward_timeout_s * 1000),
            tls=tls.peer_context(config),
        )

    def __init__(
        self,
        metrics: Metrics,
        quiet_s: float = DEFAULT_QUIET_S,
        timeout_ms: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(timeout_ms, clock, tls)
        self._metrics = metrics
        self._quiet_s = quiet_s
        # (peer, queue) -> until when that peer is not asked for that queue again.
        self._quiet_until: dict[tuple[str, str], float] = {}
        self._quiet_lock = threading.Lock()

    def _is_quiet(self, key: tuple[str, str]) -> bool:
        with self._quiet_lock:
            until = self._quiet_until.get(key)
            if until is None:
                return False
            if self._clock.monotonic() < until:
                return True
            del self._quiet_until[key]
            return False

    def dequeue(
        self,
        address: str,
        caller: Caller | None,
        request: DequeueRequest,
        limit: int,
        gone: Callable[[], bool] | None = None,
    ) -> Any:
        key = (address, request.queue)
        if self._quiet_s > 0 and self._is_quiet(key):
            self._metrics.count(FORWARDS, outcome="quiet")
            return dequeue_response([], request.queue)
        started = time.perf_counter()
        try:
            response = super().dequeue(address, caller, request, limit, gone)
        except Exception:
            self._metrics.count(FORWARDS, outcome="failed")
            raise
        finally:
            self._metrics.observe(FORWARD_SECONDS, time.perf_counter() - started)
        jobs = dequeued_count(response)
        self._metrics.count(FORWARDS, outcome="jobs" if jobs else "empty")
        self._metrics.count(FORWARDED_JOBS, jobs)
        if jobs == 0 and self._quiet_s > 0:
            with self._quiet_lock:
                self._quiet_until[key] = self._clock.monotonic() + self._quiet_s
        return response
