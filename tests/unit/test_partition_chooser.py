"""Which partition takes a queue's new jobs: one open partition per moment, so that
concurrent one-job enqueues share records, moving to the next open one each moment, so
that every open partition takes an equal share; draining partitions take none."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.commands import Refused
from pinledger.projections.store import QueueRow
from pinledger.service.api.core import Api
from pinledger.service.api.enqueue import PartitionChooser


class Ticks:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def api_draining(*drained: int) -> Api:
    settings = SimpleNamespace(drained_partitions=frozenset(drained))
    config = SimpleNamespace(settings=lambda _name: settings)
    return cast(Api, SimpleNamespace(queue_config=lambda: config))


def queue(partitions: int) -> QueueRow:
    return QueueRow(name="mail", partitions=partitions, created_at=0)


def test_calls_of_one_moment_go_to_one_partition_the_next_moment_to_the_next() -> None:
    ticks = Ticks()
    chooser = PartitionChooser(sticky_ms=5, ticks=ticks)
    api, mail = api_draining(), queue(4)
    first = {chooser.next(api, mail) for _ in range(10)}
    assert len(first) == 1
    ticks.now = 4  # the same moment
    assert {chooser.next(api, mail)} == first
    ticks.now = 5
    assert chooser.next(api, mail) == (first.pop() + 1) % 4


@given(
    partitions=st.integers(1, 12),
    drained=st.sets(st.integers(0, 11)),
    sticky_ms=st.integers(0, 20),
)
def test_every_open_partition_takes_an_equal_share_and_a_draining_one_none(
    partitions: int, drained: set[int], sticky_ms: int
) -> None:
    open_ = [p for p in range(partitions) if p not in drained]
    ticks = Ticks()
    chooser = PartitionChooser(sticky_ms=sticky_ms, ticks=ticks)
    api = api_draining(*drained)
    if not open_:
        with pytest.raises(Refused):
            chooser.next(api, queue(partitions))
        return
    taken: Counter[int] = Counter()
    for moment in range(len(open_) * 3):
        ticks.now = moment * max(sticky_ms, 1)
        taken[chooser.next(api, queue(partitions))] += 1
    assert set(taken) == set(open_)
    assert set(taken.values()) == {3}


def test_no_stickiness_is_round_robin_per_queue() -> None:
    chooser = PartitionChooser(sticky_ms=0, ticks=Ticks())
    api: Any = api_draining()
    got = [chooser.next(api, queue(3)) for _ in range(6)]
    assert got[:3] == got[3:] and sorted(got[:3]) == [0, 1, 2]
