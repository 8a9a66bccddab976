"""enqueueJobs: decide the new jobs' events and append them to one open partition of
the queue, chosen round robin."""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any

from pinledger.ledger.commands import RefusalCode, Refused, decide_enqueue
from pinledger.projections.store import QueueRow
from pinledger.service.api import convert
from pinledger.service.api.core import Api, load_queue
from pinledger.service.api.requests import Caller, EnqueueRequest
from pinledger.service.observability import telemetry

# Round-robin starting points are spread so that servers do not all start at 0.
_START_SPREAD = 64


class PartitionChooser:
    """Round robin over the partitions of a queue that take new jobs."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()

    def next(self, api: Api, queue: QueueRow) -> int:
        drained = api.queue_config().settings(queue.name).drained_partitions
        open_ = [p for p in range(queue.partitions) if p not in drained]
        if not open_:
            raise Refused(
                RefusalCode.ENQUEUE_REJECTED,
                f"every partition of queue {queue.name!r} is draining (drainPartitions in "
                "the queue config): it takes no new jobs",
            )
        with self._lock:
            counter = self._counters.setdefault(
                queue.name, itertools.count(random.randrange(_START_SPREAD))
            )
        return open_[next(counter) % len(open_)]


def enqueue_jobs(
    api: Api, chooser: PartitionChooser, caller: Caller | None, request: EnqueueRequest
) -> Any:
    queue = load_queue(api, request.queue)
    now = api.clock.now_ms()
    events = decide_enqueue(request.jobs, now, api.limits)
    if not events:
        return convert.enqueue_response([])
    partition = chooser.next(api, queue)
    descriptors = api.writer.enqueue(
        queue.name,
        partition,
        events,
        now,
        api.actor(caller),
        telemetry.current_traceparent(),
    )
    api.metrics.count("pinledger_jobs_total", len(events), queue=queue.name, action="enqueue")
    return convert.enqueue_response(descriptors)
