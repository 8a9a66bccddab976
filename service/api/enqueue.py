"""enqueueJobs: decide the new jobs' events and append them to one open partition of
the queue: the same one for every call of one moment, the next one the next moment."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from pinledger.ledger.commands import RefusalCode, Refused, decide_enqueue
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Enqueued
from pinledger.ledger.formats import FormatTooOldError
from pinledger.projections.store import QueueRow
from pinledger.service.api import convert
from pinledger.service.api.barrier import wait_projected
from pinledger.service.api.core import Api, load_queue
from pinledger.service.api.requests import Caller, EnqueueRequest
from pinledger.service.api.unique import answered, key_partition
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
    settings = api.queue_config().settings(queue.name)
    events = decide_enqueue(request.jobs, now, api.limits, settings.unique_for_ms)
    if not events:
        return convert.enqueue_response([])
    traceparent = telemetry.current_traceparent()
    if any(event.unique_key is not None for event in events):
        descriptors = _enqueue_keyed(api, chooser, queue, events, now, caller, traceparent)
    else:
        partition = chooser.next(api, queue)
        descriptors = api.writer.enqueue(
            queue.name, partition, events, now, api.actor(caller), traceparent
        )
    if traceparent is not None:
        # Each job is a trace of its own, linked to this call's (job_trace.py).
        job_trace.create_spans(queue.name, descriptors, now, traceparent)
    api.metrics.count(catalogue.JOBS_TOTAL, len(events), queue=queue.name, action="enqueue")
    return convert.enqueue_response(descriptors)


def _enqueue_keyed(
    api: Api,
    chooser: PartitionChooser,
    queue: QueueRow,
    events: list[Enqueued],
    now: int,
    caller: Caller | None,
    traceparent: str | None,
) -> list[JobDescriptor]:
    """A request with unique jobs (decision 0037): each keyed job to its key's partition,
    the others where plain jobs go, in one commit; then, once the projection holds the
    keyed records, each keyed job's answer (itself, or the job holding its key)."""
    spread = api.key_routes.partitions(api.writer.log, api.writer.prefix, queue)
    groups: dict[int, list[tuple[int, Enqueued]]] = {}
    plain: int | None = None
    for position, event in enumerate(events):
        if event.unique_key is not None:
            partition = key_partition(event.unique_key, spread)
        else:
            plain = chooser.next(api, queue) if plain is None else plain
            partition = plain
        groups.setdefault(partition, []).append((position, event))
    try:
        appended = api.writer.enqueue_spread(
            queue.name,
            [(partition, [event for _, event in group]) for partition, group in groups.items()],
            now,
            api.actor(caller),
            traceparent,
        )
    except FormatTooOldError as exc:
        raise Refused(RefusalCode.ENQUEUE_REJECTED, str(exc)) from None
    descriptors: list[JobDescriptor | None] = [None] * len(events)
    keyed: list[tuple[int, JobDescriptor]] = []
    for group, found in zip(groups.values(), appended, strict=True):
        for (position, event), descriptor in zip(group, found, strict=True):
            descriptors[position] = descriptor
            if event.unique_key is not None:
                keyed.append((position, descriptor))
    topic = api.writer.topic(queue.name)
    needed: dict[tuple[str, int], int] = {}
    for _, descriptor in keyed:
        key = (topic, descriptor.partition)
        needed[key] = max(needed.get(key, -1), descriptor.offset)
    # Appended, so accepted: a caller whose answer times out here retries with the same
    # key and is answered the job this enqueue made or found.
    wait_projected(api, needed)
    answers = answered(api.store, queue.name, [d for _, d in keyed])
    for (position, _), answer in zip(keyed, answers, strict=True):
        descriptors[position] = answer
    return [d for d in descriptors if d is not None]
