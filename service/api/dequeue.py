"""dequeueJobs and dequeueOwned: claims from the partitions this server owns, topped
up from the servers that own the queue's other partitions."""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pinledger.idl import pinlater
from pinledger.ledger.events import Event
from pinledger.ledger.writer import Traced
from pinledger.projections.store import QueueRow
from pinledger.service.api import convert
from pinledger.service.api.acks import ack_events, count_acks
from pinledger.service.api.core import (
    Api,
    DequeuedJob,
    append_by_partition,
    by_partition,
    load_queue,
)
from pinledger.service.api.errors import pinlater_error
from pinledger.service.api.requests import Caller, DequeueRequest
from pinledger.service.observability import catalogue, telemetry

log = logging.getLogger(__name__)


class _PeerOwners(Protocol):
    def peers_for(self, queue: str) -> list[str]: ...
    def is_peer(self, address: str) -> bool: ...


class _Peers(Protocol):
    def dequeue(
        self,
        address: str,
        caller: Caller | None,
        request: DequeueRequest,
        limit: int,
        gone: Callable[[], bool] | None = None,
    ) -> Any: ...


def dequeue_jobs(api: Api, caller: Caller | None, request: DequeueRequest) -> Any:
    queue = load_queue(api, request.queue)
    # The piggybacked acks are checked before anything is appended, and appended
    # always (PinLater dropped them on a rate-limited dequeue): with the claims, in one
    # round trip, when the call claims; alone, before answering, when it does not.
    acks = None if request.acks is None else ack_events(api, queue, request.acks)
    if queue.paused:
        return _paused(api, queue, caller, request, acks)
    now = api.clock.now_ms()
    if request.dry_run or not api.rate_limits.allow(queue.name):
        if request.acks is not None and acks is not None:
            append_by_partition(api, queue, acks, caller)
            count_acks(api, request.acks, queue)
        if not request.dry_run:
            raise pinlater_error(
                pinlater.ErrorCode.DEQUEUE_RATE_LIMITED,
                f"queue {queue.name!r} is rate limited to {api.rate_limits.rate(queue.name)} "
                "jobs/s on this server (maxJobsPerSecond in the queue config; 0 = paused)",
            )
        found = api.owner.peek(queue.name, request.limit, now, request.coverage)
        return forward(
            api.owner, api.peers, convert.dequeue_response(found, queue.name), caller, request
        )
    alongside: Traced | None = None
    if acks:
        alongside = (by_partition(queue, acks), telemetry.current_traceparent())
    claimed = api.owner.dequeue(
        queue.name, request.limit, now, api.actor(caller), request.coverage, alongside
    )
    if request.acks is not None:
        count_acks(api, request.acks, queue)
    response = forward(
        api.owner, api.peers, convert.dequeue_response(claimed, queue.name), caller, request
    )
    jobs = convert.dequeued_count(response)
    unavailable = api.owner.unavailable
    if jobs == 0 and unavailable is not None:
        # Not "no jobs": this server's partitions are not being served right now.
        raise pinlater_error(
            pinlater.ErrorCode.SHARD_CONNECTION_FAILED,
            f"this server cannot serve its partitions of {queue.name!r} now ({unavailable}); "
            "it reloads them by itself once that is back: retry, or dequeue elsewhere",
        )
    api.owner.note_dequeue(queue.name, jobs)
    # The jobs claimed here: a peer charged those it claimed for this call.
    api.rate_limits.charge(queue.name, len(claimed))
    api.metrics.count(catalogue.JOBS_TOTAL, jobs, queue=queue.name, action="dequeue")
    return response


def dequeue_owned(api: Api, caller: Caller | None, request: DequeueRequest) -> Any:
    """What a peer forwarded: this server's partitions only, no acks, under this
    server's share of the queue's rate limit, which charges the jobs it claims (the
    forwarding server does not): so a client calling dequeueOwned itself gets no more
    than through dequeueJobs. Past the share, or paused, it answers no job."""
    queue = load_queue(api, request.queue)
    now = api.clock.now_ms()
    found: Sequence[DequeuedJob]
    if queue.paused:  # the forwarding server had not read the pause yet
        found = ()
    elif request.dry_run:
        found = api.owner.peek(queue.name, request.limit, now, request.coverage)
    elif not api.rate_limits.allow(queue.name):
        found = []
    else:
        found = api.owner.dequeue(
            queue.name, request.limit, now, api.actor(caller), request.coverage
        )
        api.rate_limits.charge(queue.name, len(found))
    return convert.dequeue_response(found, queue.name)


def _paused(
    api: Api,
    queue: QueueRow,
    caller: Caller | None,
    request: DequeueRequest,
    acks: dict[int, list[Event]] | None,
) -> Any:
    """A queue paused from the catalog (decision 0035): no job, from this server or a
    peer (each reads the pause from its own copy of the catalog, the queue row the call
    loaded anyway: no store query). The piggybacked acks are appended all the same."""
    if request.acks is not None and acks is not None:
        append_by_partition(api, queue, acks, caller)
        count_acks(api, request.acks, queue)
    return convert.dequeue_response([], queue.name)


def forward(
    owner: _PeerOwners, peers: _Peers, response: Any, caller: Caller | None, request: DequeueRequest
) -> Any:
    """Top the response up from the other owners of the queue's partitions."""
    addresses = owner.peers_for(request.queue)
    random.shuffle(addresses)
    for address in addresses:
        wanted = request.limit - convert.dequeued_count(response)
        if wanted <= 0:
            break
        # A peer that stops answering and leaves the owners' group (frozen) is not
        # waited out: its partitions went to the servers left (service/api/peers.py).
        gone = functools.partial(_left, owner, address)
        try:
            more = peers.dequeue(address, caller, request, wanted, gone)
        except Exception as exc:  # a peer going away must not fail this call
            log.warning("forwarding a dequeue to %s failed: %s", address, exc)
            continue
        convert.merge_dequeued(response, more)
    return response


def _left(owner: _PeerOwners, address: str) -> bool:
    return not owner.is_peer(address)
