"""Group commit: concurrent appends to one partition share one record and one round
trip (docs/decisions/0020-group-commit.md).

Every caller hands in its parts (one envelope for one partition each). Per partition
one append is in flight at a time; parts that arrive meanwhile wait, and the next
append takes all of them (up to a record's limits) as one group record. Who appends is
one of the callers, never a thread of its own: a caller whose partition is idle
appends at once (a lone caller waits no longer than before), and a caller whose
append completes hands the partition to a caller still waiting there, which appends
the next group. Order within a partition is the order parts arrived in.

Memory is bounded by the callers: each waits for its own parts, so at most one part
per blocked call is pending.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from pinledger.ledger import codec
from pinledger.ledger.descriptor import JOBS_PER_RECORD
from pinledger.ledger.log import Append, Log

# A group record's value stays under this (the broker's record limit is 1 MiB; one
# part alone may be bigger, up to what an enqueue record holds, and goes alone).
GROUP_RECORD_BYTES = 512 * 1024
# A waiting caller re-checks this often in case a wake-up was missed (it never should).
_RECHECK_S = 1.0

Key = tuple[str, int]


@dataclass(eq=False, slots=True)
class Part:
    """One envelope for one partition, as a caller hands it in; the group commit fills
    in where it landed."""

    topic: str
    partition: int
    value: bytes  # codec.encode of the envelope: the record when it goes alone
    grouped: bytes  # codec.encode_part: the envelope within a group record
    traceparent: str | None
    events: int
    offset: int = -1
    first: int = 0
    error: Exception | None = None
    done: bool = False
    owner: object = field(default=None)

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)


def _record(key: Key, parts: Sequence[Part]) -> Append:
    """One record for `parts`: a plain record for one part, else a group record."""
    if len(parts) == 1:
        (part,) = parts
        return Append(key[0], key[1], part.value, codec.trace_headers(part.traceparent))
    first = 0
    for part in parts:
        part.first = first
        first += part.events
    return Append(key[0], key[1], codec.encode_group([p.grouped for p in parts]))


class GroupCommit:
    def __init__(
        self,
        log: Log,
        max_events: int = JOBS_PER_RECORD,
        max_bytes: int = GROUP_RECORD_BYTES,
    ) -> None:
        self.log = log
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._cond = threading.Condition()
        self._pending: dict[Key, list[Part]] = {}
        # Partitions with an append in flight, or handed to a waiting caller.
        self._busy: set[Key] = set()
        # Partition -> the caller it was handed to.
        self._handed: dict[Key, object] = {}
        # Records appended and the parts they held (read by tests and metrics).
        self.records = 0
        self.parts = 0

    def append(self, parts: Sequence[Part]) -> None:
        """Append `parts`, sharing records with concurrent callers; returns once every
        part has its offset, or raises the error (a LogError) of the first that failed."""
        me = object()
        with self._cond:
            for part in parts:
                part.owner = me
                self._pending.setdefault(part.key, []).append(part)
            keys = {part.key for part in parts}
            while not all(part.done for part in parts):
                taken = self._lead(keys, me)
                if not taken:
                    self._cond.wait(_RECHECK_S)
                    continue
                self._cond.release()
                try:
                    self._send(taken)
                finally:
                    self._cond.acquire()
                self._finish(taken)
        for part in parts:
            if part.error is not None:
                raise part.error

    def _lead(self, keys: set[Key], me: object) -> dict[Key, list[Part]]:
        """Take the partitions among `keys` this caller may append to now (idle with
        parts pending, or handed to it), and their next group each. Lock held."""
        taken: dict[Key, list[Part]] = {}
        for key in keys:
            pending = self._pending.get(key)
            if not pending:
                continue
            if key in self._busy and self._handed.get(key) is not me:
                continue
            self._handed.pop(key, None)
            self._busy.add(key)
            taken[key] = self._next_group(pending)
        return taken

    def _next_group(self, pending: list[Part]) -> list[Part]:
        """The longest prefix of `pending` that fits a record (at least one part)."""
        events = size = count = 0
        for part in pending:
            if count and (
                events + part.events > self.max_events or size + len(part.grouped) > self.max_bytes
            ):
                break
            events += part.events
            size += len(part.grouped) + 1
            count += 1
        group = pending[:count]
        del pending[:count]
        return group

    def _send(self, taken: dict[Key, list[Part]]) -> None:
        """One record per partition, in one append (lock not held)."""
        keys = list(taken)
        appends = [_record(key, taken[key]) for key in keys]
        try:
            offsets = self.log.append(appends)
        except Exception as exc:  # LogError, or a bug: each caller raises it, none hangs
            for key in keys:
                for part in taken[key]:
                    part.error = exc
            return
        for key, offset in zip(keys, offsets, strict=True):
            for part in taken[key]:
                part.offset = offset

    def _finish(self, taken: dict[Key, list[Part]]) -> None:
        """Mark the parts done and hand each partition on to a caller waiting there
        (lock held)."""
        for key, group in taken.items():
            for part in group:
                part.done = True
            self.records += 1
            self.parts += len(group)
            pending = self._pending.get(key)
            if pending:
                self._handed[key] = pending[0].owner
            else:
                self._busy.discard(key)
                self._pending.pop(key, None)
        self._cond.notify_all()
