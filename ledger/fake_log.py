"""An in-memory log: the fake of the Log port (ledger/log.py), for tests of owners,
handlers and projectors that need no broker.

It keeps the contract tests/contract/test_log_contract.py checks on the real adapter
too: topics with partitions numbered from offset 0, appends acknowledged at once,
readers, and consumer groups whose members get each partition of the topics they
subscribe to, one member per partition, moved by eager rebalances carried out inside
the members' polls (revoke everything, then assign) when members join, leave, time
out or change their subscriptions, or a subscribed topic comes or goes.

A record over the broker's size limit (`max_record_bytes`, by default Kafka's
message.max.bytes default, counted by `record_bytes`) is refused with a
RecordTooLargeError, and nothing of that append is written.

What a test can do that a broker does not offer: `fail()` makes calls raise LogError
(all of them, or the named operations) until `heal()`; an append failing so writes
nothing, and its error says so only when asked (`certain`), as a producer refusing
before it sends; `lose_answers()` makes appends write their records and then raise
LogError all the same, as an acknowledgement that never arrives;
`expire(group, member_id)` drops a member as if its session had timed out; with a
FakeClock, advancing it past a member's session timeout does the same.

Thread-safe: one condition guards everything; a poll waits on it (real time, up to
its timeout) for records. Rebalance callbacks run on the polling thread, outside the
lock, as the real adapter runs them on the consumer's thread.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.log import (
    BROKER_MAX_MESSAGE_BYTES,
    Append,
    GroupMember,
    LogError,
    LogRecord,
    NotAppendedError,
    PartitionKey,
    PartitionsCallback,
    Position,
    RecordTooLargeError,
    record_bytes,
)


@dataclass
class _Member:
    """A member's place in its group, as the group sees it."""

    subscription: frozenset[str]
    session_timeout_s: float
    last_seen: float
    advertised: str = ""
    # The generation this member last joined, and whether it has been told its
    # assignment for that generation.
    joined: int = -1
    assigned: bool = False


@dataclass
class _Group:
    members: dict[str, _Member] = field(default_factory=dict)
    # A change bumps `generation`; the assignment is made once every member has joined
    # it (`assigned_generation` then catches up).
    generation: int = 0
    assigned_generation: int = -1
    assignment: dict[str, list[PartitionKey]] = field(default_factory=dict)


class FakeLog:
    """Implements ledger.log.Log in memory."""

    def __init__(
        self, clock: Clock = SYSTEM_CLOCK, max_record_bytes: int = BROKER_MAX_MESSAGE_BYTES
    ) -> None:
        self._clock = clock
        # The largest record taken, as a topic's max.message.bytes.
        self.max_record_bytes = max_record_bytes
        self._cond = threading.Condition()
        self._topics: dict[str, list[list[LogRecord]]] = {}
        self._groups: dict[str, _Group] = {}
        self._failure: str | None = None
        self._failing: frozenset[str] | None = None
        # The first offset each partition still holds, where the retention removed
        # records (`remove_records_before`); 0 elsewhere.
        self._starts: dict[PartitionKey, int] = {}
        self._certain = False
        # Appends still to be written and answered with LogError (`lose_answers`).
        self._lost_answers = 0
        self._lost_reason = ""

    # -- what tests control ---------------------------------------------------------

    def fail(
        self,
        reason: str = "the log is unavailable",
        operations: Iterable[str] | None = None,
        certain: bool = False,
    ) -> None:
        """Make calls raise LogError(reason) until `heal()`: every call, or only the
        named operations ("append", "end_offsets", "poll", "group_members", ...). A
        failing append writes nothing; with `certain` its error says so
        (NotAppendedError), else it leaves that open, as a timeout does."""
        with self._cond:
            self._failure = reason
            self._failing = None if operations is None else frozenset(operations)
            self._certain = certain
            self._cond.notify_all()

    def remove_records_before(self, topic: str, partition: int, offset: int) -> None:
        """What the topic's retention (or Kafka's DeleteRecords) does: the partition no
        longer holds its records below `offset`; a reader positioned below it starts at
        it, as Kafka's readers do ("earliest")."""
        with self._cond:
            key = (topic, partition)
            self._starts[key] = max(self._starts.get(key, 0), offset)

    def heal(self) -> None:
        with self._cond:
            self._failure = None
            self._failing = None
            self._certain = False
            self._lost_answers = 0

    def lose_answers(
        self, count: int = 1, reason: str = "no acknowledgement within the append timeout"
    ) -> None:
        """Make the next `count` appends write their records, then raise
        LogError(reason): an append reported failed that is in the log all the same."""
        with self._cond:
            self._lost_answers = count
            self._lost_reason = reason

    def expire(self, group: str, member_id: str) -> None:
        """Drop a member from its group, as Kafka does when its session times out."""
        with self._cond:
            found = self._groups.get(group)
            if found is not None and found.members.pop(member_id, None) is not None:
                self._changed(found)

    # -- topics ----------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, keep_forever: bool = False) -> bool:
        # No retention here: every record is kept.
        with self._cond:
            self._check("create_topic")
            if topic in self._topics:
                return False
            self._topics[topic] = [[] for _ in range(partitions)]
            self._topics_changed(topic)
            return True

    def add_partitions(self, topic: str, total: int) -> bool:
        with self._cond:
            self._check("add_partitions")
            partitions = self._topics.get(topic)
            if partitions is None:
                raise LogError(f"cannot add partitions to topic {topic}: there is no such topic")
            if len(partitions) >= total:
                return False
            partitions.extend([] for _ in range(total - len(partitions)))
            self._topics_changed(topic)
            return True

    def delete_topic(self, topic: str) -> None:
        with self._cond:
            self._check("delete_topic")
            if self._topics.pop(topic, None) is not None:
                self._starts = {k: v for k, v in self._starts.items() if k[0] != topic}
                self._topics_changed(topic)

    def partition_count(self, topic: str) -> int | None:
        with self._cond:
            self._check("partition_count")
            partitions = self._topics.get(topic)
            return None if partitions is None else len(partitions)

    def topics(self) -> set[str]:
        with self._cond:
            self._check("topics")
            return set(self._topics)

    def existing(self, topics: Iterable[str]) -> set[str]:
        with self._cond:
            self._check("existing")
            return set(topics) & self._topics.keys()

    def forget_deleted_topics(self) -> None:
        with self._cond:
            self._check("forget_deleted_topics")

    # -- records ---------------------------------------------------------------------

    def append(self, appends: Sequence[Append]) -> list[int]:
        with self._cond:
            self._check("append")
            for a in appends:  # all or nothing
                if not 0 <= a.partition < len(self._topics.get(a.topic, ())):
                    raise NotAppendedError(
                        f"cannot append to {a.topic}[{a.partition}]: no such partition "
                        "(a queue deleted meanwhile?)"
                    )
                size = record_bytes(len(a.value), a.headers)
                if size > self.max_record_bytes:
                    raise RecordTooLargeError(
                        f"cannot append to {a.topic}[{a.partition}]: a record of {size} "
                        f"bytes is over the topic's max.message.bytes of "
                        f"{self.max_record_bytes}"
                    )
            offsets = []
            for a in appends:
                records = self._topics[a.topic][a.partition]
                offsets.append(len(records))
                records.append(
                    LogRecord(a.topic, a.partition, len(records), a.value, list(a.headers))
                )
            self._cond.notify_all()
            if self._lost_answers:
                self._lost_answers -= 1
                raise LogError(f"append: {self._lost_reason}")
            return offsets

    def records(self, topic: str, partition: int) -> list[LogRecord]:
        """Every record of a partition (for tests)."""
        with self._cond:
            return list(self._topics[topic][partition])

    def end_offset(self, topic: str, partition: int) -> int:
        ends = self.end_offsets([(topic, partition)])
        if (topic, partition) not in ends:
            raise LogError(f"no partition {partition} of topic {topic} in the log")
        return ends[(topic, partition)]

    def end_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        with self._cond:
            self._check("end_offsets")
            return {
                (topic, p): len(self._topics[topic][p])
                for topic, p in partitions
                if 0 <= p < len(self._topics.get(topic, ()))
            }

    def start_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        with self._cond:
            self._check("start_offsets")
            return {
                (topic, p): min(self._starts.get((topic, p), 0), len(self._topics[topic][p]))
                for topic, p in partitions
                if 0 <= p < len(self._topics.get(topic, ()))
            }

    def reader(self, positions: Sequence[Position]) -> FakeReader:
        with self._cond:
            self._check("reader")
        return FakeReader(self, {(p.topic, p.partition): p.offset for p in positions})

    def close(self) -> None:
        pass

    # -- groups ----------------------------------------------------------------------

    def group_reader(
        self,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        session_timeout_ms: int = 6000,
        advertised: str = "",
    ) -> FakeGroupReader:
        with self._cond:
            self._check("group_reader")
        reader = FakeGroupReader(
            self, group, member_id, on_revoked, on_assigned, session_timeout_ms / 1000, advertised
        )
        reader.subscribe(topics)
        return reader

    def group_members(self, group: str) -> list[GroupMember]:
        with self._cond:
            self._check("group_members")
            found = self._groups.get(group)
            if found is None:
                return []
            self._expire_sessions(found)
            stable = found.assigned_generation == found.generation
            return [
                GroupMember(
                    member_id,
                    list(found.assignment.get(member_id, [])) if stable else [],
                    found.members[member_id].advertised,
                    group_member_id=member_id,
                )
                for member_id in sorted(found.members)
            ]

    def remove_member(self, group: str, member: GroupMember) -> bool:
        with self._cond:
            self._check("remove_member")
            found = self._groups.get(group)
            if found is None or found.members.pop(member.group_member_id, None) is None:
                return False
            self._changed(found)
            return True

    # -- inside (callers hold self._cond) ----------------------------------------------

    def _check(self, operation: str) -> None:
        if self._failure is not None and (self._failing is None or operation in self._failing):
            if self._certain and operation == "append":
                raise NotAppendedError(f"{operation}: {self._failure}")
            raise LogError(f"{operation}: {self._failure}")

    def _group(self, name: str) -> _Group:
        return self._groups.setdefault(name, _Group())

    def _changed(self, group: _Group) -> None:
        """Something the assignment depends on changed: rebalance."""
        group.generation += 1
        self._cond.notify_all()

    def _topics_changed(self, topic: str) -> None:
        for group in self._groups.values():
            if any(topic in m.subscription for m in group.members.values()):
                self._changed(group)

    def _expire_sessions(self, group: _Group) -> None:
        now = self._clock.monotonic()
        gone = [
            member_id
            for member_id, m in group.members.items()
            if now - m.last_seen > m.session_timeout_s
        ]
        for member_id in gone:
            del group.members[member_id]
        if gone:
            self._changed(group)

    def _assign(self, group: _Group) -> None:
        """A sticky, balanced assignment: a partition stays with its previous owner when
        that member still wants it and has not reached its share; the rest go to the
        eligible member owning the fewest."""
        wanted = sorted(
            (topic, p)
            for topic in {t for m in group.members.values() for t in m.subscription}
            if topic in self._topics
            for p in range(len(self._topics[topic]))
        )
        share = math.ceil(len(wanted) / len(group.members)) if group.members else 0
        previous = {key: member for member, keys in group.assignment.items() for key in keys}
        assignment: dict[str, list[PartitionKey]] = {member: [] for member in group.members}
        rest = []
        for key in wanted:
            owner = previous.get(key, "")
            member = group.members.get(owner)
            keeps = member is not None and key[0] in member.subscription
            if keeps and len(assignment[owner]) < share:
                assignment[owner].append(key)
            else:
                rest.append(key)
        for key in rest:
            eligible = [m for m, state in group.members.items() if key[0] in state.subscription]
            owner = min(eligible, key=lambda m: (len(assignment[m]), m))
            assignment[owner].append(key)
        group.assignment = assignment
        group.assigned_generation = group.generation


class FakeReader:
    """Implements ledger.log.Reader over a FakeLog."""

    def __init__(self, log: FakeLog, positions: dict[PartitionKey, int]) -> None:
        self._log = log
        self._positions = positions
        self._closed = False

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        deadline = time.monotonic() + timeout_ms / 1000
        with self._log._cond:
            while True:
                self._log._check("poll")
                if self._closed:
                    raise LogError("poll of a closed reader")
                records = _take(self._log, self._positions, sorted(self._positions), max_records)
                remaining = deadline - time.monotonic()
                if records or remaining <= 0:
                    return records
                self._log._cond.wait(remaining)

    def close(self) -> None:
        self._closed = True


def _take(
    log: FakeLog, positions: dict[PartitionKey, int], keys: list[PartitionKey], limit: int
) -> list[LogRecord]:
    """Up to `limit` records from these partitions' positions, advancing them."""
    records: list[LogRecord] = []
    for key in keys:
        partitions = log._topics.get(key[0])
        if partitions is None or key[1] >= len(partitions) or len(records) >= limit:
            continue
        start = max(positions[key], log._starts.get(key, 0))
        batch = partitions[key[1]][start : start + limit - len(records)]
        records.extend(batch)
        positions[key] = start + len(batch)
    return records


class FakeGroupReader:
    """Implements ledger.log.GroupReader: one member of a FakeLog group."""

    def __init__(
        self,
        log: FakeLog,
        group: str,
        member_id: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        session_timeout_s: float,
        advertised: str = "",
    ) -> None:
        self._log = log
        self._advertised = advertised
        self._group = group
        self._member_id = member_id
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned
        self._session_timeout_s = session_timeout_s
        self._subscription: frozenset[str] = frozenset()
        # What this member holds and where it reads each partition.
        self._positions: dict[PartitionKey, int] = {}
        # During a rebalance: the positions of the partitions revoked.
        self._kept: dict[PartitionKey, int] = {}
        self._closed = False
        # `wake` was called: the poll under way returns.
        self._woken = False

    def subscribe(self, topics: Iterable[str]) -> None:
        wanted = frozenset(topics)
        with self._log._cond:
            self._log._check("subscribe")
            if wanted == self._subscription:
                return
            self._subscription = wanted
            group = self._log._group(self._group)
            member = group.members.get(self._member_id)
            if member is not None:
                if wanted:
                    member.subscription = wanted
                else:  # an empty subscription leaves the group, as in kafka-python
                    del group.members[self._member_id]
                self._log._changed(group)

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            with self._log._cond:
                self._log._check("poll")
                if self._closed:
                    raise LogError(f"poll of a closed member of group {self._group}")
                revoked, assigned = self._rebalance()
                if revoked is None and assigned is None:
                    keys = sorted(self._positions)
                    records = _take(self._log, self._positions, keys, max_records)
                    remaining = deadline - time.monotonic()
                    if records or remaining <= 0 or self._woken:
                        self._woken = False
                        return records
                    self._log._cond.wait(remaining)
                    continue
            # The callbacks run outside the lock: they may take the caller's locks.
            if revoked is not None:
                self._on_revoked(revoked)
            if assigned is not None:
                self._on_assigned(assigned)
                self._woken = True  # as kafka's: the poll ends, the owner adopts them

    def _rebalance(self) -> tuple[list[PartitionKey] | None, list[PartitionKey] | None]:
        """This member's part of a rebalance (lock held): (partitions to revoke, newly
        assigned partitions), None for a step with nothing to tell."""
        log = self._log
        group = log._group(self._group)
        log._expire_sessions(group)
        member = group.members.get(self._member_id)
        if member is None and self._subscription:  # joining, or back after eviction
            member = _Member(self._subscription, self._session_timeout_s, 0.0, self._advertised)
            group.members[self._member_id] = member
            log._changed(group)
        revoked = None
        if member is None:  # subscribed to nothing
            if self._positions:
                revoked, self._positions = sorted(self._positions), {}
            return revoked, None
        member.last_seen = log._clock.monotonic()
        if member.joined < group.generation:
            # Positions survive for partitions assigned again (as in kafka-python).
            revoked, self._kept = sorted(self._positions), self._positions
            self._positions = {}
            member.joined, member.assigned = group.generation, False
            if all(m.joined == group.generation for m in group.members.values()):
                log._assign(group)
                log._cond.notify_all()  # the members waiting for this assignment
        assigned = None
        if not member.assigned and group.assigned_generation == member.joined:
            member.assigned = True
            assigned = list(group.assignment.get(self._member_id, []))
            self._positions = {key: self._kept.get(key, 0) for key in assigned}
            self._kept = {}
        return revoked, assigned

    def seek(self, topic: str, partition: int, offset: int) -> None:
        with self._log._cond:
            self._log._check("seek")
            if (topic, partition) not in self._positions or offset < 0:
                raise LogError(
                    f"cannot seek {topic}[{partition}] to offset {offset}: not assigned to "
                    f"{self._member_id}, or a negative offset"
                )
            self._positions[(topic, partition)] = offset

    def assignment(self) -> list[PartitionKey]:
        with self._log._cond:
            return sorted(self._positions)

    def wake(self) -> None:
        with self._log._cond:
            self._woken = True
            self._log._cond.notify_all()

    def confirmed_at(self) -> float | None:
        # The fake group keeps a member while it polls within its session timeout: its
        # last poll is when the group last saw it.
        with self._log._cond:
            member = self._log._group(self._group).members.get(self._member_id)
            return None if member is None or member.joined < 0 else member.last_seen

    def request_rejoin(self) -> None:
        with self._log._cond:
            self._log._changed(self._log._group(self._group))

    def close(self) -> None:
        with self._log._cond:
            if self._closed:
                return
            self._closed = True
            group = self._log._group(self._group)
            if group.members.pop(self._member_id, None) is not None:
                self._log._changed(group)
