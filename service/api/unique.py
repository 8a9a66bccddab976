"""Unique jobs at the enqueue (decision 0037): which partition a keyed job goes to, and
what its caller is answered once the partition's fold has decided.

The decision is the fold's (ledger/state.py `key_holder`): one owner per partition
applies the log in order, so every job of a key must reach one partition. A key goes to
partition crc32(key) % N, N the partitions the queue was created with: fixed for the
queue's life (a resize changes which partitions take plain jobs, never N), read from
the catalog's QueueCreated record. The caller's answer waits for the projection of its
records (the read barrier) and names, for a key that was taken, the job holding it.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence

from pinledger.ledger.commands import RefusalCode, Refused
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.log import Log
from pinledger.projections.actions import Tag
from pinledger.projections.catalog_log import catalog_envelopes, created_partitions
from pinledger.projections.store import LedgerStore, QueueRow


def key_partition(key: str, partitions: int) -> int:
    """The partition of a key among `partitions`: a hash every release computes alike
    (Python's hash() of a str differs from process to process)."""
    return zlib.crc32(key.encode("utf-8")) % partitions


class KeyRoutes:
    """The partition count each queue spreads its keys over, by (queue, created_at):
    read from the catalog once per queue and server, kept for the queue's life (a queue
    deleted and created again is another key)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def partitions(self, log: Log, prefix: str, queue: QueueRow) -> int:
        key = (queue.name, queue.created_at)
        found = self._known.get(key)
        if found is not None:
            return found
        created = created_partitions(catalog_envelopes(log, prefix))
        with self._lock:
            self._known.update(created)
        found = created.get(key)
        if found is None:
            # The store holds a queue the catalog no longer does (deleted since).
            raise Refused(
                RefusalCode.ENQUEUE_REJECTED,
                f"queue {queue.name!r} is not in the catalog as the store has it (deleted "
                "or created again since): retry the enqueue",
            )
        return found


def answered(
    store: LedgerStore, queue: str, descriptors: Sequence[JobDescriptor]
) -> list[JobDescriptor]:
    """What each keyed job's caller is answered, once the projection holds its record:
    the job itself when its enqueue created it, else the job whose key turned it away
    (the `held_by` its timeline row names). Plain jobs are answered as they are."""
    answers = list(descriptors)
    by_partition: dict[int, list[int]] = {}
    for position, found in enumerate(descriptors):
        by_partition.setdefault(found.partition, []).append(position)
    for partition, positions in by_partition.items():
        ids = [descriptors[p].local_id for p in positions]
        created = store.load_jobs(queue, partition, ids)
        holders: dict[int, int] = {}
        for position in positions:
            local_id = descriptors[position].local_id
            if local_id in created:
                continue
            holder = _holder(store, queue, partition, local_id)
            if holder is not None:
                holders[position] = holder
        priorities = _priorities(store, queue, partition, set(holders.values()))
        for position, holder in holders.items():
            priority = priorities.get(holder, descriptors[position].priority)
            answers[position] = JobDescriptor(queue, partition, priority, holder)
    return answers


def _holder(store: LedgerStore, queue: str, partition: int, local_id: int) -> int | None:
    """The job that turned the enqueue of `local_id` away; None when the enqueue created
    its job (finished and removed since)."""
    for row in store.timeline(queue, partition, local_id):
        if row.type == Tag.ENQUEUED and not row.applied and "held_by" in row.detail:
            return int(row.detail["held_by"])
    return None


def _priorities(
    store: LedgerStore, queue: str, partition: int, holders: set[int]
) -> dict[int, int]:
    """Each holder's priority, for its descriptor: from its row, else (removed since)
    from its enqueue's timeline row."""
    found = {i: job.priority for i, job in store.load_jobs(queue, partition, holders).items()}
    for holder in holders - found.keys():
        for row in store.timeline(queue, partition, holder):
            if row.type == Tag.ENQUEUED and row.applied:
                found[holder] = int(row.detail["priority"])
                break
    return found
