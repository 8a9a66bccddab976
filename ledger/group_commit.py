"""Group commit: concurrent appends to one partition share one record and one round
trip (docs/decisions/0020-hot-path.md).

Every caller hands in its parts (one envelope for one partition each). Per partition
at most `max_in_flight` appends are in flight; parts that arrive while they are wait,
and the next append takes all of them (up to a record's limits) as one group record.
Who appends is one of the callers, never a thread of its own: a caller finding room
appends at once (a lone caller waits no longer than before); when an append completes,
the callers waiting there are woken and one of them appends the next group. Two
appends in flight to one partition may land in either order (they are concurrent
calls); one caller's records to a partition go out in a single append, in its order
(the producer keeps the order of one append), never in two appends in flight at once.

Memory is bounded by the callers: each waits for its own parts, so at most one part
per blocked call is pending.

Sizes: a part whose record alone would be over the record limit (the broker's
max.message.bytes, or less: the writer's PINLEDGER_MAX_RECORD_BYTES) is refused before
it is queued, so it never shares an append with other callers' records: a record the
broker refuses would fail them too, though theirs may have been written. A group
record stays under `max_bytes` (and the record limit), counted in encoded bytes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pinledger.ledger import codec
from pinledger.ledger.descriptor import JOBS_PER_RECORD
from pinledger.ledger.log import (
    DEFAULT_MAX_RECORD_BYTES,
    RECORD_OVERHEAD,
    Append,
    Log,
    LogError,
    NotAppendedError,
    RecordTooLargeError,
    record_bytes,
)

# A group record stays under this (the broker's record limit is 1 MiB; one part alone
# may be bigger, up to the record limit, and goes alone). The writer cuts a caller's
# events into parts of this size too.
GROUP_RECORD_BYTES = 512 * 1024
# Appends in flight per partition. One would make every call behind another wait for
# it (a second call to an idle-ish partition paid up to two round trips); two keep the
# next call going at once while a third and later ones share records (measured,
# docs/performance-history.md "Hot path").
MAX_IN_FLIGHT = 2
# A waiting caller re-checks this often in case a wake-up was missed (it never should).
_RECHECK_S = 1.0


def longest_append_s(append_timeout_s: float) -> float:
    """The longest `GroupCommit.append` takes when every append to the log ends, taken
    or failed, within `append_timeout_s` (the adapters' append timeout): a caller's
    parts wait for the first of the appends in flight to their partition to end, then
    go out in the next one. (Parts queue behind a full record's worth of others' only
    when more than JOBS_PER_RECORD events wait for one partition; and once an append
    times out, the adapters fail the next ones at once until a broker answers.)"""
    return 2 * append_timeout_s


Key = tuple[str, int]
# Told how long each append to the log took, in seconds, whether it was taken or failed
# (the server's pinledger_log_append_seconds).
AppendTimer = Callable[[float], None]


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
    # What its record takes against the broker's limit when it goes alone (a plain
    # record, its trace context in a header); in a group record it takes
    # len(grouped) + 1.
    size: int = field(init=False)

    def __post_init__(self) -> None:
        headers = codec.trace_headers(self.traceparent) if self.traceparent else ()
        self.size = record_bytes(len(self.value), headers)

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
        max_in_flight: int = MAX_IN_FLIGHT,
        grouping: bool = True,
        record_limit: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self.log = log
        # Whether parts of several callers may share a group record (ledger format 2,
        # ledger/formats.py). Without it every part is a plain record of its own, and
        # concurrent callers' records still go out in one append (one round trip).
        self.grouping = grouping
        self.max_events = max_events
        self.max_bytes = max_bytes
        # The largest record (`record_bytes`) appended: a part whose record is bigger is
        # refused (RecordTooLargeError) before it is queued.
        self.record_limit = record_limit
        self.max_in_flight = max_in_flight
        self._cond = threading.Condition()
        self._pending: dict[Key, list[Part]] = {}
        # Per partition, the callers with a part in an append in flight, one entry per
        # part (how many appends are in flight is `_flights`).
        self._flying: dict[Key, Counter[object]] = {}
        self._flights: Counter[Key] = Counter()
        # Records appended and the parts they held (read by tests and metrics).
        self.records = 0
        self.parts = 0
        # Told the time of every append (`log_append`); None: appends are not timed.
        self.on_append: AppendTimer | None = None

    def log_append(self, appends: Sequence[Append]) -> list[int]:
        """`log.append`, timed for `on_append`: every record the writer appends goes
        through here, on either Kafka adapter, so one histogram covers them all."""
        timer = self.on_append
        if timer is None:
            return self.log.append(appends)
        started = time.perf_counter()
        try:
            return self.log.append(appends)
        finally:  # a failed append took time too: a broker timing out shows here
            timer(time.perf_counter() - started)

    def waiting(self) -> int:
        """Parts queued for an append not yet made (read by tests)."""
        with self._cond:
            return sum(len(parts) for parts in self._pending.values())

    @property
    def part_bytes(self) -> int:
        """The size (`record_bytes`) a caller's events are cut to: a group record's, or
        the record limit when that is smaller."""
        return min(self.max_bytes, self.record_limit)

    def append(self, parts: Sequence[Part]) -> None:
        """Append `parts`, sharing records with concurrent callers; returns once every
        part has its offset, or raises the error (a LogError) of the first that failed:
        a NotAppendedError only when none of `parts` was written. A part whose record
        would be over the record limit fails them all with a RecordTooLargeError before
        any is queued."""
        for part in parts:
            size = part.size
            if size > self.record_limit:
                raise RecordTooLargeError(
                    f"cannot append to {part.topic}[{part.partition}]: a record of {size} "
                    f"bytes is over the limit of {self.record_limit} "
                    "(PINLEDGER_MAX_RECORD_BYTES, or the topic's max.message.bytes)"
                )
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
        failed = [part.error for part in parts if part.error is not None]
        if not failed:
            return
        first = failed[0]
        if isinstance(first, NotAppendedError) and not (
            len(failed) == len(parts) and all(isinstance(e, NotAppendedError) for e in failed)
        ):
            # Another of this caller's records may be in the log (it went in another
            # append, which succeeded or left it open): the error must not say none is.
            raise LogError(f"{first} (other records of this call may be in the log)") from first
        raise first

    def _lead(self, keys: set[Key], me: object) -> dict[Key, list[list[Part]]]:
        """Take the next group of each partition among `keys` that may take another
        append now, followed by this caller's own parts queued right behind it, in
        groups of their own (they go in the same append, in order: a call of many
        records does not wait a round trip per record). Lock held."""
        taken: dict[Key, list[list[Part]]] = {}
        for key in keys:
            pending = self._pending.get(key)
            if not pending or self._flights[key] >= self.max_in_flight:
                continue
            flying = self._flying.get(key) or Counter()
            group = self._next_group(pending, flying)
            if not group:
                continue
            groups = [group]
            if self.grouping:
                while pending and pending[0].owner is me and group[-1].owner is me:
                    group = self._next_group(pending, flying, only=me)
                    groups.append(group)
            else:
                # Every part a record of its own: all that may go now, in one append
                # (a part behind its caller's part in flight waits, as above).
                while pending and (group := self._next_group(pending, flying)):
                    groups.append(group)
            self._flights[key] += 1
            self._flying.setdefault(key, Counter()).update(p.owner for g in groups for p in g)
            taken[key] = groups
        return taken

    def _next_group(
        self, pending: list[Part], flying: Counter[object], only: object | None = None
    ) -> list[Part]:
        """The longest prefix of `pending` that fits a record (one part at least), and
        holds no part of a caller with an earlier part still in flight there (two
        appends in flight may land in either order, a caller's own parts may not), and
        only parts of `only` when it is given."""
        # The group record's size so far: its brackets and framing, each part and a
        # comma after it.
        events, count, size = 0, 0, RECORD_OVERHEAD + 1
        limit = self.part_bytes
        for part in pending:
            if flying[part.owner] or (only is not None and part.owner is not only):
                break
            if count and not self.grouping:
                break
            if count and (
                events + part.events > self.max_events or size + len(part.grouped) + 1 > limit
            ):
                break
            events += part.events
            size += len(part.grouped) + 1
            count += 1
        group = pending[:count]
        del pending[:count]
        return group

    def _send(self, taken: dict[Key, list[list[Part]]]) -> None:
        """One record per group, all in one append (lock not held)."""
        groups = [(key, group) for key, key_groups in taken.items() for group in key_groups]
        appends = [_record(key, group) for key, group in groups]
        try:
            offsets = self.log_append(appends)
        except Exception as exc:  # LogError, or a bug: each caller raises it, none hangs
            for _, group in groups:
                for part in group:
                    part.error = exc
            return
        for (_, group), offset in zip(groups, offsets, strict=True):
            for part in group:
                part.offset = offset

    def _finish(self, taken: dict[Key, list[list[Part]]]) -> None:
        """Mark the parts done and wake the callers waiting for a partition (lock
        held)."""
        for key, groups in taken.items():
            for group in groups:
                for part in group:
                    part.done = True
                self.records += 1
                self.parts += len(group)
            self._flights[key] -= 1
            self._flying[key].subtract(p.owner for g in groups for p in g)
            if not self._flights[key]:
                del self._flights[key]
                del self._flying[key]
            if not self._pending.get(key):
                self._pending.pop(key, None)
        self._cond.notify_all()
