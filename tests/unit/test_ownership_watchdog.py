"""The ownership watchdog on a FakeClock: a queue topic owned by nobody, or an owned
partition whose records are not projected, makes it ask the group to rebalance after
its grace period, and not before."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import cast

from pinledger.ledger.log import GroupMember, Log
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import PartitionProjector
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.dispatcher import ReadyBuffer
from pinledger.service.ownership.loop import OwnerLoop
from pinledger.service.ownership.partitions import Key, Owned, Partitions
from pinledger.service.ownership.subscription import Subscription
from pinledger.service.ownership.watchdog import STALL_GRACE_S, UNOWNED_GRACE_S, Watchdog
from pinledger.service.testing.clock import FakeClock


class _Kafka:
    """The topics that exist and each partition's log end."""

    def __init__(self, topics: set[str], ends: dict[Key, int]) -> None:
        self.topics = topics
        self.ends = ends

    def existing(self, topics: Iterable[str]) -> set[str]:
        return self.topics & set(topics)

    def end_offsets(self, keys: Sequence[Key]) -> dict[Key, int]:
        return {k: self.ends[k] for k in keys if k in self.ends}


def _watchdog(
    clock: FakeClock, kafka: _Kafka, owned: Sequence[Owned] = ()
) -> tuple[Watchdog, threading.Event]:
    metrics = Metrics()
    group_log = cast(Log, kafka)
    partitions = Partitions(
        "p.", 3, cast(Store, None), group_log, metrics, LedgerMetrics(metrics), lambda: None
    )
    for o in owned:
        partitions.owned[(o.topic, o.partition)] = o
    subscription = Subscription("p.", LedgerWriter(cast(Log, None), "p."), clock)
    subscription.set_queues({"mail", "thumbs"})
    loop = cast(OwnerLoop, SimpleNamespace(loop_at=clock.monotonic(), thread=threading.Thread()))
    rejoin = threading.Event()
    return Watchdog("p.owners", group_log, subscription, partitions, loop, rejoin, clock), rejoin


def test_a_queue_owned_by_nobody_for_the_grace_period_asks_for_a_rebalance() -> None:
    clock = FakeClock()
    watchdog, rejoin = _watchdog(clock, _Kafka({"p.q.mail", "p.q.thumbs"}, {}))
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
    watchdog, rejoin = _watchdog(clock, _Kafka({"p.q.mail"}, {}))  # thumbs' topic is gone
    members = [GroupMember("pinledger@a:1", [("p.q.mail", 0)])]
    for _ in range(3):
        watchdog.check_unowned(members)
        clock.advance(UNOWNED_GRACE_S)
    assert not rejoin.is_set()


def test_an_empty_group_counts_as_every_queue_unowned() -> None:
    clock = FakeClock()
    watchdog, rejoin = _watchdog(clock, _Kafka({"p.q.mail"}, {}))
    watchdog.check_unowned([])
    clock.advance(UNOWNED_GRACE_S)
    watchdog.check_unowned([])
    assert rejoin.is_set()


def _owned(partition: int, next_offset: int) -> Owned:
    projector = cast(PartitionProjector, SimpleNamespace(next_offset=next_offset))
    return Owned("mail", "p.q.mail", partition, projector, ReadyBuffer(3), target=0)


def test_an_owned_partition_not_projecting_its_records_asks_for_a_rebalance() -> None:
    clock = FakeClock()
    stuck, current = _owned(0, next_offset=5), _owned(1, next_offset=9)
    kafka = _Kafka(set(), {("p.q.mail", 0): 6, ("p.q.mail", 1): 9})
    watchdog, rejoin = _watchdog(clock, kafka, [stuck, current])
    watchdog.check_lag()
    clock.advance(STALL_GRACE_S - 1)
    watchdog.check_lag()
    assert not rejoin.is_set()
    clock.advance(1)
    watchdog.check_lag()
    assert rejoin.is_set()


def test_a_lagging_partition_that_progresses_is_left_alone() -> None:
    clock = FakeClock()
    owned = _owned(0, next_offset=0)
    watchdog, rejoin = _watchdog(clock, _Kafka(set(), {("p.q.mail", 0): 1000}), [owned])
    for offset in range(100, 1000, 100):
        owned.projector.next_offset = offset
        watchdog.check_lag()
        clock.advance(STALL_GRACE_S / 2)
    assert not rejoin.is_set()
