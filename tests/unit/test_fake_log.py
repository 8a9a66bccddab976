"""What FakeLog offers beyond the contract (tests/contract): failure injection (an
append that fails writing nothing, or that is written and still fails) and member
expiry, for tests of error paths and rebalances without a broker."""

from __future__ import annotations

import pytest

from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.fake_log import FakeGroupReader, FakeLog
from pinledger.ledger.log import Append, LogError, NotAppendedError, PartitionKey


def test_a_failing_log_raises_log_error_until_healed() -> None:
    log = FakeLog()
    log.create_topic("t", 1)
    log.fail("broker down")
    with pytest.raises(LogError, match="broker down"):
        log.append([Append("t", 0, b"x")])
    with pytest.raises(LogError):
        log.end_offsets([("t", 0)])
    log.heal()
    assert log.append([Append("t", 0, b"x")]) == [0]


def test_only_the_named_operations_fail() -> None:
    log = FakeLog()
    log.create_topic("t", 1)
    log.fail("no offsets", operations={"end_offsets"})
    assert log.append([Append("t", 0, b"x")]) == [0]
    with pytest.raises(LogError, match="no offsets"):
        log.end_offsets([("t", 0)])


def test_an_append_to_a_missing_partition_appends_nothing() -> None:
    log = FakeLog()
    log.create_topic("t", 1)
    with pytest.raises(NotAppendedError):
        log.append([Append("t", 0, b"kept out"), Append("t", 1, b"no such partition")])
    assert log.end_offset("t", 0) == 0


def test_a_failing_append_says_nothing_was_written_only_when_asked() -> None:
    log = FakeLog()
    log.create_topic("t", 1)
    log.fail("down", operations=["append"])
    with pytest.raises(LogError) as raised:
        log.append([Append("t", 0, b"x")])
    assert not isinstance(raised.value, NotAppendedError)
    log.fail("refused", operations=["append"], certain=True)
    with pytest.raises(NotAppendedError):
        log.append([Append("t", 0, b"x")])
    assert log.end_offset("t", 0) == 0


def test_a_lost_answer_leaves_the_records_in_the_log() -> None:
    log = FakeLog()
    log.create_topic("t", 1)
    log.lose_answers(1)
    with pytest.raises(LogError, match="no acknowledgement") as raised:
        log.append([Append("t", 0, b"landed")])
    assert not isinstance(raised.value, NotAppendedError)
    assert [r.value for r in log.records("t", 0)] == [b"landed"]
    assert log.append([Append("t", 0, b"next")]) == [1], "only the next append loses it"


class _Held:
    def __init__(self) -> None:
        self.keys: list[PartitionKey] = []

    def revoked(self, keys: list[PartitionKey]) -> None:
        self.keys = [k for k in self.keys if k not in keys]

    def assigned(self, keys: list[PartitionKey]) -> None:
        self.keys = sorted(keys)


def _member(log: FakeLog, name: str, held: _Held) -> FakeGroupReader:
    return log.group_reader("g", ["t"], name, held.revoked, held.assigned, 6000)


def test_a_member_that_stops_polling_loses_its_partitions_after_its_session() -> None:
    clock = FakeClock()
    log = FakeLog(clock)
    log.create_topic("t", 4)
    a_held, b_held = _Held(), _Held()
    a, b = _member(log, "a", a_held), _member(log, "b", b_held)
    for _ in range(3):  # one thread stands in for both members' threads
        a.poll(10, 0)
        b.poll(10, 0)
    assert len(a_held.keys) == 2 and len(b_held.keys) == 2
    clock.advance(5)
    b.poll(10, 0)
    clock.advance(5)  # a has not polled for 10 s: past its 6 s session
    b.poll(10, 0)
    assert b_held.keys == [("t", p) for p in range(4)]
    assert [m.member_id for m in log.group_members("g")] == ["b"]


def test_an_expired_member_rejoins_when_it_polls_again() -> None:
    log = FakeLog()
    log.create_topic("t", 2)
    held = _Held()
    member = _member(log, "a", held)
    member.poll(10, 0)
    assert held.keys == [("t", 0), ("t", 1)]
    log.expire("g", "a")
    assert log.group_members("g") == []
    member.poll(10, 0)
    assert held.keys == [("t", 0), ("t", 1)]
    assert [m.member_id for m in log.group_members("g")] == ["a"]
