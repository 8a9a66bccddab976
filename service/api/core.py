"""What every RPC module shares: the server's parts (`Api`) and the load -> decide ->
append helper (`load_queue`, `check_jobs`, `append_by_partition`).

An RPC loads the queue (cache, then the log), checks the request's jobs against it,
decides events with `ledger.commands` and appends them here, one record per
partition and chunk; the partition's owner applies them (`state.evolve`) and the
projector writes them to Postgres. Nothing in service/api writes job state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pinledger.idl import pinlater
from pinledger.ledger.clock import Clock
from pinledger.ledger.commands import Limits, check_queue_name
from pinledger.ledger.descriptor import DescriptorError, JobDescriptor
from pinledger.ledger.events import Actor, Event
from pinledger.ledger.log import LogError
from pinledger.ledger.state import Job
from pinledger.ledger.writer import Batch, LedgerWriter, Traced
from pinledger.projections.store import LedgerStore, QueueRow
from pinledger.service.api.directory import QueueDirectory
from pinledger.service.api.errors import pinlater_error
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.ratelimit import QueueRateLimits
from pinledger.service.api.requests import Caller
from pinledger.service.api.unique import KeyRoutes
from pinledger.service.config import Config
from pinledger.service.observability import telemetry
from pinledger.service.observability.metrics import Metrics
from pinledger.service.queue_config import QueueConfig

# Jobs per record for bulk actions (retry, delete): as many as one enqueue record holds.
BULK_CHUNK = 1000


class DequeuedJob(Protocol):
    """A job an owner handed to a dequeue, with the partition it lives in (the owner's
    ownership/claims.py `DequeuedJob`; the record of it in the log is ledger's `Claimed`
    event)."""

    @property
    def partition(self) -> int: ...
    @property
    def job(self) -> Job: ...
    @property
    def traceparent(self) -> str | None: ...


class OwnerPort(Protocol):
    """What the API asks of this server's partition owner."""

    def add_queue(self, name: str) -> None: ...
    def serves_all(self, queue: str, partitions: int) -> bool: ...
    def peers_for(self, queue: str) -> list[str]: ...
    def is_peer(self, address: str) -> bool: ...
    def peek(
        self, queue: str, limit: int, now: int, coverage: float = 1.0
    ) -> Sequence[DequeuedJob]: ...
    def dequeue(
        self,
        queue: str,
        limit: int,
        now: int,
        actor: Actor,
        coverage: float = 1.0,
        alongside: Traced | None = None,
    ) -> Sequence[DequeuedJob]: ...
    @property
    def unavailable(self) -> str | None:
        """Why this server's partitions are not served now, or None."""
        ...

    def note_dequeue(self, queue: str, jobs: int) -> None:
        """A dequeue call this server answered, with how many jobs (0: empty)."""
        ...


@dataclass(frozen=True, slots=True)
class Api:
    """The server's parts an RPC uses."""

    config: Config
    store: LedgerStore
    writer: LedgerWriter
    owner: OwnerPort
    metrics: Metrics
    queues: QueueDirectory
    rate_limits: QueueRateLimits
    queue_config: Callable[[], QueueConfig]
    peers: PeerPool
    clock: Clock
    limits: Limits
    # Where unique jobs' keys go (decision 0037): read from the catalog once per queue.
    key_routes: KeyRoutes = field(default_factory=KeyRoutes)

    def actor(self, caller: Caller | None) -> Actor:
        if caller is None:
            return Actor(server=self.config.server_id)
        return Actor(
            source=caller.source, request_id=caller.request_id, server=self.config.server_id
        )


def load_queue(api: Api, name: str) -> QueueRow:
    """The queue, from the cache or else its topic; QUEUE_NOT_FOUND when neither."""
    check_queue_name(name)  # a descriptor's queue is parsed, not yet checked for length
    row = api.queues.get_or_log(name, api.writer.log, api.writer.topic(name))
    if row is None:
        raise pinlater_error(pinlater.ErrorCode.QUEUE_NOT_FOUND, f"queue {name!r} does not exist")
    return row


def check_jobs(api: Api, queue: QueueRow, jobs: Iterable[JobDescriptor]) -> None:
    """Each descriptor must name the request's queue and one of its partitions. One
    past the directory's count is checked against the queue's topic before it is
    refused: Kafka's partitions are added before the catalog's record, and the
    directory re-reads the catalog every second, so a grown queue's job of a new
    partition can be handed out (by this server's owner, or a peer's through a forwarded
    dequeue) before the directory lists the partition."""
    listed = list(jobs)
    partitions = queue.partitions
    if any(parsed.partition >= partitions for parsed in listed):
        partitions = max(partitions, _topic_partitions(api, queue.name))
    for parsed in listed:
        if parsed.queue != queue.name:
            raise DescriptorError(
                f"{str(parsed)!r} belongs to queue {parsed.queue!r}, not {queue.name!r}"
            )
        if parsed.partition >= partitions:
            raise DescriptorError(
                f"{str(parsed)!r}: queue {queue.name!r} has no partition {parsed.partition} "
                f"(it has {partitions})"
            )


def check_job(api: Api, queue: QueueRow, parsed: JobDescriptor) -> None:
    check_jobs(api, queue, (parsed,))


def _topic_partitions(api: Api, name: str) -> int:
    """The partitions the queue's topic has (0: unknown, Kafka not answering)."""
    try:
        return api.writer.log.partition_count(api.writer.topic(name)) or 0
    except LogError:
        return 0


def by_partition(queue: QueueRow, events: dict[int, list[Event]]) -> list[Batch]:
    """Each partition's events, at most BULK_CHUNK per record."""
    return [
        (queue.name, partition, evs[i : i + BULK_CHUNK])
        for partition, evs in events.items()
        for i in range(0, len(evs), BULK_CHUNK)
    ]


def append_by_partition(
    api: Api, queue: QueueRow, events: dict[int, list[Event]], caller: Caller | None
) -> int:
    """Append each partition's events, at most BULK_CHUNK per record, in one round
    trip; returns how many events were appended."""
    batches = by_partition(queue, events)
    if batches:
        api.writer.append_many(
            batches,
            api.clock.now_ms(),
            api.actor(caller),
            telemetry.current_traceparent(),  # the call's span: acks link back to it
        )
    return sum(len(evs) for _, _, evs in batches)
