"""The ownership watchdog on a FakeClock: a queue topic owned by nobody, or an owned
partition whose records are not projected, makes it ask the group to rebalance after
its grace period, and not before."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import cast

from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, GroupMember
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import QueueRow
from pinledger.service.ownership.loop import OwnerLoop
from pinledger.service.ownership.maintenance.watchdog import (
    STALL_GRACE_S,
    UNOWNED_GRACE_S,
    Watchdog,
)
from pinledger.service.ownership.partitions import Key, Owned
from pinledger.service.ownership.topics import OwnedTopics
from tests.unit.ownership_fixtures import make_owned, make_partitions


def _log(topics: set[str], ends: dict[Key, int]) -> FakeLog:
    """A log holding these topics (two partitions each), each partition filled up to
    its end offset."""
    log = FakeLog()
    for topic in topics | {t for t, _ in ends}:
        log.create_topic(topic, 2)
    for (topic, partition), end in ends.items():
        log.append([Append(topic, partition, b"record")] * end)
    return log


def _watchdog(
    clock: FakeClock, log: FakeLog, owned: Sequence[Owned] = ()
) -> tuple[Watchdog, threading.Event]:
    partitions = make_partitions(*owned, log=log)
    subscription = OwnedTopics("p.", LedgerWriter(log, "p."), clock)
    subscription.set_queues({"mail", "thumbs"})
    loop = cast(OwnerLoop, SimpleNamespace(loop_at=clock.monotonic(), thread=threading.Thread()))
    rejoin = threading.Event()
    return Watchdog("p.owners", log, subscription, partitions, loop, rejoin, clock), rejoin


def test_a_queue_owned_by_nobody_for_the_grace_period_asks_for_a_rebalance() -> None:
    clock = FakeClock()
    watchdog, rejoin = _watchdog(clock, _log({"p.q.mail", "p.q.thumbs"}, {}))
    members = [GroupMember("pinledger@a:1", [("p.q.mail", 0)])]
    watchdog.check_unowned(members)
    clock.advance(UNOWNED_GRACE_S - 0.5)
    watchdog.check_unowned(members)
    assert not rejoin.is_set()
    clock.advance(0.5)
    watchdog.check_unowned(members)
    assert rejoin.is_set()


def test_a_queue_being_deleted_is_not_a_reason_to_rebalance() -> None:
    clock = FakeClock()
    watchdog, rejoin = _watchdog(clock, _log({"p.q.mail"}, {}))  # thumbs' topic is gone
    members = [GroupMember("pinledger@a:1", [("p.q.mail", 0)])]
    for _ in range(3):
        watchdog.check_unowned(members)
        clock.advance(UNOWNED_GRACE_S)
    assert not rejoin.is_set()


def test_a_grown_queue_whose_new_partition_nobody_owns_asks_for_a_rebalance() -> None:
    """Grown live (decision 0030), a queue's new partition must be handed out; if the
    group's assignment missed it, the watchdog asks again."""
    clock = FakeClock()
    log = _log({"p.q.mail", "p.q.thumbs"}, {})
    log.add_partitions("p.q.mail", 3)
    watchdog, rejoin = _watchdog(clock, log)
    store = watchdog.partitions.store
    store.migrate()
    store.start_offset("p.catalog", 0)  # the catalog projection starts at 0
    store.commit_catalog(
        "p.catalog",
        0,
        2,
        [(QueueRow("mail", 2, 0), ["p.q.mail"]), (QueueRow("thumbs", 2, 0), ["p.q.thumbs"])],
        [],
        [(QueueRow("mail", 3, 0), ["p.q.mail"])],
    )
    members = [
        GroupMember("pinledger@a:1", [("p.q.mail", 0), ("p.q.mail", 1), ("p.q.thumbs", 0)]),
        GroupMember("pinledger@b:1", [("p.q.thumbs", 1)]),
    ]
    watchdog.check_unowned(members)
    clock.advance(UNOWNED_GRACE_S)
    watchdog.check_unowned(members)
    assert rejoin.is_set()
    rejoin.clear()
    members[1] = GroupMember("pinledger@b:1", [("p.q.thumbs", 1), ("p.q.mail", 2)])
    for _ in range(3):
        watchdog.check_unowned(members)
        clock.advance(UNOWNED_GRACE_S)
    assert not rejoin.is_set()


def test_an_empty_group_counts_as_every_queue_unowned() -> None:
    clock = FakeClock()
    watchdog, rejoin = _watchdog(clock, _log({"p.q.mail"}, {}))
    watchdog.check_unowned([])
    clock.advance(UNOWNED_GRACE_S)
    watchdog.check_unowned([])
    assert rejoin.is_set()


def test_an_owned_partition_not_projecting_its_records_asks_for_a_rebalance() -> None:
    clock = FakeClock()
    stuck, current = make_owned(0, next_offset=5), make_owned(1, next_offset=9)
    log = _log(set(), {("p.q.mail", 0): 6, ("p.q.mail", 1): 9})
    watchdog, rejoin = _watchdog(clock, log, [stuck, current])
    watchdog.check_lag()
    clock.advance(STALL_GRACE_S - 1)
    watchdog.check_lag()
    assert not rejoin.is_set()
    clock.advance(1)
    watchdog.check_lag()
    assert rejoin.is_set()


def test_a_lagging_partition_that_progresses_is_left_alone() -> None:
    clock = FakeClock()
    owned = make_owned(0, next_offset=0)
    watchdog, rejoin = _watchdog(clock, _log(set(), {("p.q.mail", 0): 1000}), [owned])
    for offset in range(100, 1000, 100):
        owned.projector.next_offset = offset
        watchdog.check_lag()
        clock.advance(STALL_GRACE_S / 2)
    assert not rejoin.is_set()
