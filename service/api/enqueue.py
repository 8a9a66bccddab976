"""enqueueJobs: decide the new jobs' events and append them to one open partition of
the queue: the same one for every call of one moment, the next one the next moment."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from pinledger.ledger.commands import RefusalCode, Refused, decide_enqueue
from pinledger.projections.store import QueueRow
from pinledger.service.api import convert
from pinledger.service.api.core import Api, load_queue
from pinledger.service.api.requests import Caller, EnqueueRequest
from pinledger.service.observability import catalogue, job_trace, telemetry

# Why a queue's new jobs go to one partition for a moment (Config.enqueue_sticky_ms,
# 5 ms): calls to one partition in flight together share records
# (ledger/group_commit.py): one produce, one delivery, one record for the owner to
# fetch. Spread round robin, 8 concurrent one-job calls on 4 partitions never shared
# one (each partition has room for two appends in flight). A moment is a few produce
# round trips: long enough for calls to meet, short enough that the partitions (and
# their owners) share the work evenly.
#
# Each server starts a queue at a random partition, so that servers' moments differ.
_START_SPREAD = 64


def _monotonic_ms() -> int:
    # Not the injected clock: which partition takes a job is spreading of load, not a
    # time any job or record holds, and it must move on while a test's clock stands.
    return time.monotonic_ns() // 1_000_000


class PartitionChooser:
    """The partition of a queue that takes new jobs now: one open partition per moment
    of `sticky_ms`, moving to the next open one each moment (0: the next one each call,
    round robin)."""

    def __init__(self, sticky_ms: int, ticks: Callable[[], int] = _monotonic_ms) -> None:
        self._sticky_ms = sticky_ms
        self._ticks = ticks
        # Per queue: where this server starts, and its calls (for round robin).
        self._queues: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def next(self, api: Api, queue: QueueRow) -> int:
        drained = api.queue_config().settings(queue.name).drained_partitions
        # Partitions past the queue's open ones drain after a resize to fewer.
        open_ = [p for p in range(queue.open) if p not in drained]
        if not open_:
            raise Refused(
                RefusalCode.ENQUEUE_REJECTED,
                f"every partition of queue {queue.name!r} that takes jobs is draining "
                "(drainPartitions in the queue config): it takes no new jobs",
            )
        with self._lock:
            state = self._queues.setdefault(queue.name, [random.randrange(_START_SPREAD), 0])
            state[1] += 1
            step = self._ticks() // self._sticky_ms if self._sticky_ms > 0 else state[1]
        return open_[(state[0] + step) % len(open_)]


def enqueue_jobs(
    api: Api, chooser: PartitionChooser, caller: Caller | None, request: EnqueueRequest
) -> Any:
    queue = load_queue(api, request.queue)
    now = api.clock.now_ms()
    events = decide_enqueue(request.jobs, now, api.limits)
    if not events:
        return convert.enqueue_response([])
    partition = chooser.next(api, queue)
    traceparent = telemetry.current_traceparent()
    descriptors = api.writer.enqueue(
        queue.name, partition, events, now, api.actor(caller), traceparent
    )
    if traceparent is not None:
        # Each job is a trace of its own, linked to this call's (job_trace.py).
        job_trace.create_spans(queue.name, descriptors, now, traceparent)
    api.metrics.count(catalogue.JOBS_TOTAL, len(events), queue=queue.name, action="enqueue")
    return convert.enqueue_response(descriptors)
