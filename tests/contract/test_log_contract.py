"""The Log port's contract (ledger/log.py), run against both Kafka adapters (kafka-python,
librdkafka) and FakeLog."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType

import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from pinledger.ledger.codec import trace_headers
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import (
    BROKER_MAX_MESSAGE_BYTES,
    RECORD_OVERHEAD,
    Append,
    GroupReader,
    Log,
    LogError,
    LogRecord,
    NotAppendedError,
    PartitionKey,
    Position,
    RecordTooLargeError,
    queue_topic,
    record_bytes,
)
from tests.settings import stack_settings

# Long enough for a rebalance of a real group on a loaded machine; waits end as soon as
# what they wait for holds.
_WAIT_S = 30.0


def _read_all(log: Log, positions: list[Position], count: int) -> list[LogRecord]:
    reader = log.reader(positions)
    records: list[LogRecord] = []
    deadline = time.monotonic() + 20
    while len(records) < count and time.monotonic() < deadline:
        records += reader.poll(1000, 200)
    reader.close()
    return records


def _eventually(what: str, check: Callable[[], bool], within_s: float = _WAIT_S) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, f"not within {within_s:.0f} s: {what}"
        time.sleep(0.05)


# -- topics -----------------------------------------------------------------------------


def test_a_queue_topic_has_its_own_partition_count(log: Log, prefix: str) -> None:
    fifo, wide = queue_topic(prefix, "fifo"), queue_topic(prefix, "wide")
    assert log.create_topic(fifo, 1)
    assert log.create_topic(wide, 4)
    assert not log.create_topic(wide, 4), "creating an existing topic is a no-op"
    assert log.partition_count(fifo) == 1
    assert log.partition_count(wide) == 4
    assert log.partition_count(queue_topic(prefix, "missing")) is None
    assert {fifo, wide} <= log.topics()
    log.delete_topic(wide)
    assert wide not in log.topics()


def test_existing_names_only_the_topics_that_exist(log: Log, prefix: str) -> None:
    here, gone = queue_topic(prefix, "here"), queue_topic(prefix, "never")
    log.create_topic(here, 1)
    assert log.existing([here, gone]) == {here}
    assert log.existing([]) == set()


def test_a_deleted_topic_is_gone_and_comes_back_empty(log: Log, prefix: str) -> None:
    topic = queue_topic(prefix, "again")
    log.create_topic(topic, 2)
    log.append([Append(topic, 1, b"old")])
    log.delete_topic(topic)
    assert log.existing([topic]) == set()
    assert log.partition_count(topic) is None
    log.delete_topic(topic)  # deleting what is not there is a no-op
    log.forget_deleted_topics()
    assert log.create_topic(topic, 2), "a deleted topic can be created again"
    assert log.end_offsets([(topic, 0), (topic, 1)]) == {(topic, 0): 0, (topic, 1): 0}


# -- records ----------------------------------------------------------------------------


def test_append_returns_offsets_and_records_read_back_in_order(log: Log, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    log.create_topic(topic, 3)
    appends = [Append(topic, i % 3, f"v{i}".encode(), trace_headers(f"tp{i}")) for i in range(30)]
    offsets = log.append(appends)
    for partition in range(3):
        mine = [o for a, o in zip(appends, offsets, strict=True) if a.partition == partition]
        assert mine == list(range(10)), "each partition numbers its records from 0"
        assert log.end_offset(topic, partition) == 10

    records = _read_all(log, [Position(topic, p, 5) for p in range(3)], 15)
    assert len(records) == 15
    by_partition = {p: [r for r in records if r.partition == p] for p in range(3)}
    for partition, got in by_partition.items():
        assert [r.offset for r in got] == list(range(5, 10))
        expected = [a for a in appends if a.partition == partition][5:]
        assert [r.value for r in got] == [a.value for a in expected]
        assert [r.headers for r in got] == [a.headers for a in expected]


def test_end_offsets_leave_out_topics_that_do_not_exist(log: Log, prefix: str) -> None:
    topic, missing = queue_topic(prefix, "q"), queue_topic(prefix, "missing")
    log.create_topic(topic, 2)
    log.append([Append(topic, 1, b"a"), Append(topic, 1, b"b")])
    ends = log.end_offsets([(topic, 0), (topic, 1), (missing, 0)])
    assert ends == {(topic, 0): 0, (topic, 1): 2}
    assert log.end_offsets([]) == {}


def _remove_records_before(log: Log, topic: str, partition: int, offset: int) -> None:
    """What a topic's retention does to its oldest records: Kafka's DeleteRecords on a
    real broker, the fake's own on the FakeLog."""
    if isinstance(log, FakeLog):
        log.remove_records_before(topic, partition, offset)
        return
    admin = KafkaAdminClient(bootstrap_servers=stack_settings().kafka)
    try:
        admin.delete_records({TopicPartition(topic, partition): offset})
    finally:
        admin.close()


def test_start_offsets_say_where_the_retention_left_each_partition(log: Log, prefix: str) -> None:
    topic, missing = queue_topic(prefix, "q"), queue_topic(prefix, "missing")
    log.create_topic(topic, 2)
    log.append([Append(topic, 1, value) for value in (b"a", b"b", b"c")])
    assert log.start_offsets([(topic, 0), (topic, 1), (missing, 0)]) == {
        (topic, 0): 0,
        (topic, 1): 0,
    }
    _remove_records_before(log, topic, 1, 2)
    assert log.start_offsets([(topic, 0), (topic, 1)]) == {(topic, 0): 0, (topic, 1): 2}
    # A reader asked for what is gone starts where the log now starts.
    [record] = _read_all(log, [Position(topic, 1, 0)], 1)
    assert (record.offset, record.value) == (2, b"c")
    assert log.start_offsets([]) == {}


def test_a_reader_waits_for_records_appended_after_it_started(log: Log, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    log.create_topic(topic, 1)
    reader = log.reader([Position(topic, 0, 0)])
    try:
        assert reader.poll(10, 100) == [], "nothing appended yet"
        log.append([Append(topic, 0, b"first"), Append(topic, 0, b"second")])
        records: list[LogRecord] = []
        deadline = time.monotonic() + 20
        while len(records) < 2 and time.monotonic() < deadline:
            records += reader.poll(10, 200)
        assert [(r.offset, r.value) for r in records] == [(0, b"first"), (1, b"second")]
    finally:
        reader.close()


def test_a_record_over_the_topics_limit_is_refused_and_nothing_of_it_is_written(
    log: Log, prefix: str
) -> None:
    """A topic takes records up to its max.message.bytes (Kafka's default here), counted
    as `record_bytes` counts them; a bigger one is refused with an error that says it
    was not written, so its caller may act as if the append never happened."""
    topic = queue_topic(prefix, "big")
    log.create_topic(topic, 1)
    with pytest.raises(RecordTooLargeError):
        log.append([Append(topic, 0, b"x" * (BROKER_MAX_MESSAGE_BYTES + 1))])
    assert log.end_offset(topic, 0) == 0
    fits = b"x" * (BROKER_MAX_MESSAGE_BYTES - RECORD_OVERHEAD)
    assert record_bytes(len(fits), []) <= BROKER_MAX_MESSAGE_BYTES
    assert log.append([Append(topic, 0, fits)]) == [0]
    assert isinstance(RecordTooLargeError("x"), NotAppendedError)


def test_a_missing_partition_is_a_log_error(log: Log, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    with pytest.raises(LogError):
        log.end_offset(topic, 0)
    log.create_topic(topic, 1)
    with pytest.raises(LogError):
        log.end_offset(topic, 3)


# -- groups -----------------------------------------------------------------------------


class Member:
    """A group member polling on its own thread, as an owner does: the reader is made,
    polled, sought and closed on that thread only."""

    def __init__(
        self,
        log: Log,
        group: str,
        topics: Iterable[str],
        member_id: str,
        seek_to: dict[PartitionKey, int] | None = None,
        advertised: str = "",
    ) -> None:
        self.member_id = member_id
        self._advertised = advertised
        self._lock = threading.Lock()
        self._held: list[PartitionKey] = []
        self._records: list[LogRecord] = []
        self._topics: list[str] | None = None
        self._fresh = False
        self._assignments = 0
        self._seek_to = seek_to or {}
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._rejoin = threading.Event()
        # False: stop polling without leaving the group (`vanish`).
        self._leave = True
        # What the reader said of its membership at its last step (`confirmed_at`).
        self._confirmed: float | None = None
        self._thread = threading.Thread(
            target=self._run, args=(log, group, list(topics)), daemon=True
        )
        self._thread.start()

    def _revoked(self, keys: list[PartitionKey]) -> None:
        with self._lock:
            self._held = [k for k in self._held if k not in keys]

    def _assigned(self, keys: list[PartitionKey]) -> None:
        with self._lock:
            self._held = sorted(keys)
            self._fresh = True
            self._assignments += 1

    def _run(self, log: Log, group: str, topics: list[str]) -> None:
        reader: GroupReader | None = None
        try:
            reader = log.group_reader(
                group,
                topics,
                self.member_id,
                self._revoked,
                self._assigned,
                advertised=self._advertised,
            )
            while not self._stop.is_set():
                self._step(reader)
        except BaseException as exc:  # handed to the test thread
            self._error = exc
        finally:
            if reader is not None and self._leave:
                reader.close()

    def _step(self, reader: GroupReader) -> None:
        with self._lock:
            topics, self._topics = self._topics, None
        if topics is not None:
            reader.subscribe(topics)
        if self._rejoin.is_set():
            self._rejoin.clear()
            reader.request_rejoin()
        records = reader.poll(100, 100)
        with self._lock:
            fresh, self._fresh = self._fresh, False
            held = list(self._held)
        if fresh:
            for key in held:
                if key in self._seek_to:
                    reader.seek(key[0], key[1], self._seek_to[key])
            records = [r for r in records if (r.topic, r.partition) not in self._seek_to]
        confirmed = reader.confirmed_at()
        with self._lock:
            self._records.extend(records)
            self._confirmed = confirmed

    def confirmed_at(self) -> float | None:
        self._raise()
        with self._lock:
            return self._confirmed

    def vanish(self) -> None:
        """Stop polling without leaving the group, as a process that was killed (its
        session may still be kept alive by a heartbeat thread, as kafka-python's)."""
        self._leave = False
        self.close()

    def held(self) -> list[PartitionKey]:
        self._raise()
        with self._lock:
            return list(self._held)

    def records(self) -> list[LogRecord]:
        self._raise()
        with self._lock:
            return list(self._records)

    def assignments(self) -> int:
        """How many times this member was told its assignment."""
        self._raise()
        with self._lock:
            return self._assignments

    def subscribe(self, topics: Iterable[str]) -> None:
        with self._lock:
            self._topics = list(topics)

    def request_rejoin(self) -> None:
        self._rejoin.set()

    def _raise(self) -> None:
        if self._error is not None:
            raise AssertionError(f"member {self.member_id} failed") from self._error

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=_WAIT_S)
        self._raise()

    def __enter__(self) -> Member:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _partitions(topic: str, count: int) -> list[PartitionKey]:
    return [(topic, p) for p in range(count)]


def test_a_lone_member_owns_every_partition_and_reads_from_where_it_seeks(
    log: Log, prefix: str
) -> None:
    topic = queue_topic(prefix, "q")
    log.create_topic(topic, 2)
    log.append([Append(topic, p, f"{p}:{i}".encode()) for i in range(5) for p in range(2)])
    seek_to = {(topic, 0): 3, (topic, 1): 0}
    with Member(log, f"{prefix}owners", [topic], "alone", seek_to) as member:
        _eventually("both partitions assigned", lambda: member.held() == _partitions(topic, 2))
        _eventually("7 records read", lambda: len(member.records()) >= 7)
        got = member.records()
        for partition, start in ((0, 3), (1, 0)):
            mine = [r for r in got if r.partition == partition]
            assert [r.offset for r in mine] == list(range(start, 5))
            assert [r.value for r in mine] == [f"{partition}:{i}".encode() for i in range(start, 5)]


def test_partitions_added_to_a_topic_are_writable_and_assigned_to_the_group(
    log: Log, prefix: str
) -> None:
    """A queue grown live (decision 0030): the new partitions take appends at once, the
    old ones keep their records, and the group's member is assigned the new ones
    without being told anything."""
    topic = queue_topic(prefix, "grows")
    log.create_topic(topic, 2)
    log.append([Append(topic, 1, b"before")])
    with Member(log, f"{prefix}owners", [topic], "alone") as member:
        _eventually("both partitions assigned", lambda: member.held() == _partitions(topic, 2))
        # Let the metadata refresh a join starts be answered first: then only a later
        # refresh can tell the group (kafka-python's default came 5 min later).
        time.sleep(1.0)
        assert log.add_partitions(topic, 5)
        assert log.partition_count(topic) == 5
        assert not log.add_partitions(topic, 5), "adding to as many is a no-op"
        assert not log.add_partitions(topic, 3), "a topic never loses a partition"
        assert log.append([Append(topic, 4, b"after")]) == [0]
        _eventually("the new partitions assigned", lambda: member.held() == _partitions(topic, 5))
    assert log.end_offsets(_partitions(topic, 5)) == {
        (topic, 0): 0,
        (topic, 1): 1,
        (topic, 2): 0,
        (topic, 3): 0,
        (topic, 4): 1,
    }
    with pytest.raises(LogError, match="no such topic"):
        log.add_partitions(queue_topic(prefix, "missing"), 2)


def test_two_members_share_the_partitions_and_one_takes_all_when_the_other_leaves(
    log: Log, prefix: str
) -> None:
    topic, group = queue_topic(prefix, "q"), f"{prefix}owners"
    log.create_topic(topic, 4)
    everything = _partitions(topic, 4)
    first = Member(log, group, [topic], "first")
    try:
        _eventually("the first member owns all", lambda: first.held() == everything)
        with Member(log, group, [topic], "second") as second:

            def shared() -> bool:
                a, b = first.held(), second.held()
                return bool(a) and bool(b) and sorted(a + b) == everything

            _eventually("the partitions shared by both members", shared)
            assert not set(first.held()) & set(second.held()), "a partition has one owner"

            def described() -> bool:
                members = {m.member_id: sorted(m.partitions) for m in log.group_members(group)}
                return members == {"first": first.held(), "second": second.held()}

            _eventually("group_members lists both with their partitions", described)
        _eventually("the remaining member owns all again", lambda: first.held() == everything)
        _eventually(
            "group_members lists the remaining member only",
            lambda: [m.member_id for m in log.group_members(group)] == ["first"],
        )
    finally:
        first.close()


def test_a_member_removed_by_another_client_loses_its_partitions_at_once(
    log: Log, prefix: str
) -> None:
    """What a server does for a peer whose process is gone (decision 0039): removing it
    hands its partitions to the others now, not at its session timeout (6 s here; a
    kafka-python member that stopped polling even keeps heartbeating for minutes)."""
    topic, group = queue_topic(prefix, "q"), f"{prefix}owners"
    log.create_topic(topic, 4)
    everything = _partitions(topic, 4)
    with Member(log, group, [topic], "first") as first:
        second = Member(log, group, [topic], "second")
        _eventually("both hold partitions", lambda: bool(first.held()) and bool(second.held()))
        _eventually("both listed", lambda: len(log.group_members(group)) == 2)
        [gone] = [m for m in log.group_members(group) if m.member_id == "second"]
        assert gone.group_member_id, "a listed member names its membership"
        second.vanish()
        removed_at = time.monotonic()
        assert log.remove_member(group, gone) is True
        _eventually("the first member owns all", lambda: first.held() == everything, 4.0)
        assert time.monotonic() - removed_at < 4.0
        assert [m.member_id for m in log.group_members(group)] == ["first"]
        assert log.remove_member(group, gone) is False, "removed twice"


def test_a_polling_member_knows_the_group_confirmed_it_recently(log: Log, prefix: str) -> None:
    """The owner's lease (service/ownership/lease.py) rests on this: a member that
    polls hears from the group at least every heartbeat."""
    topic = queue_topic(prefix, "q")
    log.create_topic(topic, 1)
    with Member(log, f"{prefix}owners", [topic], "alone") as member:
        _eventually("assigned", lambda: member.held() == _partitions(topic, 1))

        def recent() -> bool:
            at = member.confirmed_at()
            return at is not None and time.monotonic() - at < 1.0

        _eventually("membership confirmed within the last second", recent)
        time.sleep(1.5)
        assert recent(), "confirmations keep coming while the member polls"


def test_members_that_advertise_and_members_that_do_not_share_one_group(
    log: Log, prefix: str
) -> None:
    """A rolling upgrade: servers that advertise their ledger formats and servers of a
    release that advertises nothing are members of one group, and group_members lists
    what each said (decision 0025)."""
    topic, group = queue_topic(prefix, "q"), f"{prefix}owners"
    log.create_topic(topic, 4)
    everything = _partitions(topic, 4)
    with (
        Member(log, group, [topic], "new", advertised="formats=1,2") as new,
        Member(log, group, [topic], "old") as old,
    ):

        def shared() -> bool:
            a, b = new.held(), old.held()
            return bool(a) and bool(b) and sorted(a + b) == everything

        _eventually("the partitions shared by both members", shared)

        def described() -> bool:
            said = {m.member_id: m.advertised for m in log.group_members(group)}
            return said == {"new": "formats=1,2", "old": ""}

        _eventually("group_members lists what each member advertised", described)


def test_a_member_gets_the_partitions_of_a_topic_it_subscribes_to(log: Log, prefix: str) -> None:
    first, second = queue_topic(prefix, "first"), queue_topic(prefix, "second")
    log.create_topic(first, 1)
    with Member(log, f"{prefix}owners", [first], "member") as member:
        _eventually("the first topic assigned", lambda: member.held() == [(first, 0)])
        log.create_topic(second, 2)
        member.subscribe([first, second])
        _eventually(
            "the second topic assigned too",
            lambda: member.held() == [(first, 0), (second, 0), (second, 1)],
        )
        member.subscribe([second])
        _eventually("the first topic let go", lambda: member.held() == _partitions(second, 2))


def test_a_member_asked_to_rejoin_gets_its_partitions_assigned_again(log: Log, prefix: str) -> None:
    """The owner's remedy for a topic left out of an assignment: a rejoin makes the
    group assign every subscribed partition again."""
    topic = queue_topic(prefix, "q")
    log.create_topic(topic, 2)
    with Member(log, f"{prefix}owners", [topic], "rejoining") as member:
        _eventually("assigned", lambda: member.held() == _partitions(topic, 2))
        log.append([Append(topic, 0, b"before")])
        _eventually("the record read", lambda: len(member.records()) == 1)
        assignments = member.assignments()
        member.request_rejoin()
        _eventually("assigned again", lambda: member.assignments() > assignments)
        assert member.held() == _partitions(topic, 2)
        # Partitions held before and after read on from where they were.
        log.append([Append(topic, 0, b"after")])
        _eventually("the next record read", lambda: len(member.records()) == 2)
        assert [r.value for r in member.records()] == [b"before", b"after"]


def test_seeking_a_partition_not_assigned_is_a_log_error(log: Log, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    log.create_topic(topic, 1)
    reader = log.group_reader(f"{prefix}owners", [topic], "seeker", lambda _: None, lambda _: None)
    try:
        with pytest.raises(LogError):
            reader.seek(queue_topic(prefix, "other"), 0, 0)
    finally:
        reader.close()


def test_an_unknown_group_has_no_members(log: Log, prefix: str) -> None:
    assert log.group_members(f"{prefix}nobody") == []
