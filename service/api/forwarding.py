"""Forwarded dequeues, counted: how often a dequeue had to ask another server, how
many jobs that brought, how long it took. With `serve --processes N` a dequeue that
lands on a process whose partitions are empty forwards; these series show whether
forwarding dominates (docs/decisions/0019-processes.md).

    pinledger_forwarded_dequeues_total{outcome}  counter    outcome: jobs, empty, failed
    pinledger_forwarded_jobs_total               counter    jobs a peer returned
    pinledger_forward_seconds                    histogram  one dequeueOwned round trip
"""

from __future__ import annotations

import time
from typing import Any

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.service.api.convert import dequeued_count
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.requests import Caller, DequeueRequest
from pinledger.service.observability.metrics import Metrics

FORWARDS = "pinledger_forwarded_dequeues_total"
FORWARDED_JOBS = "pinledger_forwarded_jobs_total"
FORWARD_SECONDS = "pinledger_forward_seconds"


class CountingPeerPool(PeerPool):
    def __init__(
        self, metrics: Metrics, timeout_ms: int = 10_000, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        super().__init__(timeout_ms, clock)
        self._metrics = metrics

    def dequeue(
        self, address: str, caller: Caller | None, request: DequeueRequest, limit: int
    ) -> Any:
        started = time.perf_counter()
        try:
            response = super().dequeue(address, caller, request, limit)
        except Exception:
            self._metrics.count(FORWARDS, outcome="failed")
            raise
        finally:
            self._metrics.observe(FORWARD_SECONDS, time.perf_counter() - started)
        jobs = dequeued_count(response)
        self._metrics.count(FORWARDS, outcome="jobs" if jobs else "empty")
        self._metrics.count(FORWARDED_JOBS, jobs)
        return response
