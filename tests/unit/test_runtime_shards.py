"""A queue spread over store shards on the fakes (issue 23; decision 0031): servers
place a new queue's partitions on two shards by catalog records, every shard projects
the catalog, each partition's jobs land on its shard alone, reads see them all, a
resize places the partitions it adds, and deleting the queue clears every shard."""

from __future__ import annotations

import dataclasses

import pytest

from pinledger.idl import pinlater
from pinledger.ledger.descriptor import parse
from pinledger.ledger.state import JobState
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.store import JobFilter
from pinledger.service.testing.runtime import GONE, TEST_CONFIG, Runtime, job

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=4)
SUCCEEDED = pinlater.PinLaterJobState.SUCCEEDED


def _held(store: FakeStore, queue: str) -> dict[int, int]:
    """Jobs per partition a shard holds, any state."""
    held: dict[int, int] = {}
    for state in JobState:
        for row in store.select(JobFilter(queue, state, priority=1), 1000):
            held[row.partition] = held.get(row.partition, 0) + 1
    return held


def test_a_queue_over_two_shards_is_served_and_each_shard_holds_its_partitions() -> None:
    with Runtime(CONFIG, shards=2) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")
        rows = {name: {q.name: q for q in shard.queues()} for name, shard in rt.shards.items()}
        # Every shard projects the catalog; the placements alternate by the fewest rule.
        assert rows["a"]["mail"].shards == rows["b"]["mail"].shards == ("a", "b", "a", "b")

        enqueued = [d for i in range(16) for d in b.enqueue("mail", job(b"j%d" % i))]
        assert {parse(d).partition for d in enqueued} == {0, 1, 2, 3}
        rt.settle()
        got: dict[str, bytes] = {}

        def served() -> bool:
            got.update(a.dequeue("mail", 50))
            return len(got) == len(enqueued)

        rt.advance_until(served, "every job to be dequeued across both shards")
        a.ack("mail", succeeded=list(got))
        rt.settle()
        assert a.count("mail", SUCCEEDED) == len(enqueued)
        assert a.lookup(enqueued[1]).jobState == SUCCEEDED
        assert _held(rt.shards["a"], "mail") == {0: 4, 2: 4}
        assert _held(rt.shards["b"], "mail") == {1: 4, 3: 4}

        # A resize places only the partitions it adds, on the shard holding fewer.
        rt.writer.placer = a.writer.placer
        rt.resize_queue("mail", 5)
        rt.advance_until(lambda: rt.store.queues()[0].partitions == 5, "the resize to be projected")
        assert rt.shards["b"].queues()[0].shards == ("a", "b", "a", "b", "a")
        rt.clock.advance(2)  # the directories re-read the catalog
        late = [d for i in range(10) for d in b.enqueue("mail", job(b"late %d" % i))]
        assert 4 in {parse(d).partition for d in late}
        rt.settle()
        assert 4 in _held(rt.shards["a"], "mail") and 4 not in _held(rt.shards["b"], "mail")

        # Deleting the queue clears it from every shard, by the same catalog record.
        rt.writer.delete_queue("mail", rt.clock.now_ms(), GONE)
        rt.advance_until(
            lambda: not any(shard.queues() for shard in rt.shards.values()),
            "every shard to forget the queue",
        )
        assert _held(rt.shards["a"], "mail") == _held(rt.shards["b"], "mail") == {}


def test_a_shard_down_pauses_only_its_partitions_and_they_serve_again_when_it_returns() -> None:
    with Runtime(CONFIG, shards=2) as rt:
        a = rt.node()
        a.create_queue("mail")
        rt.settle()
        rt.shards["b"].fail("shard b's database is down")
        rt.clock.advance(2)  # claim timeouts and refills find it soon after
        # Partitions 1 and 3 (on b) pause; 0 and 2 (on a) serve throughout.
        rt.advance_until(
            lambda: sorted(a.serving()) == [("mail", 0), ("mail", 2)],
            "the owner to pause the partitions on b and serve the others",
        )
        enqueued = [d for i in range(8) for d in a.enqueue("mail", job(b"j%d" % i))]
        on_a = [d for d in enqueued if parse(d).partition in (0, 2)]
        got: dict[str, bytes] = {}

        def served_on_a() -> bool:
            got.update(a.dequeue("mail", 50))
            return set(on_a) <= set(got)

        rt.advance_until(served_on_a, "the jobs of the partitions on a to be dequeued")
        assert {parse(d).partition for d in got} <= {0, 2}
        on_b = next(d for d in enqueued if parse(d).partition == 1)
        with pytest.raises(pinlater.PinLaterException) as refused:
            a.lookup(on_b)
        assert refused.value.errorCode == pinlater.ErrorCode.SHARD_CONNECTION_FAILED
        assert "store shard 'b'" in refused.value.message

        rt.shards["b"].recover()
        rt.advance_until(
            lambda: sorted(a.serving()) == [("mail", p) for p in range(4)],
            "the partitions on b to serve again once it answers",
        )

        def served_all() -> bool:
            got.update(a.dequeue("mail", 50))
            return set(enqueued) <= set(got)

        rt.advance_until(served_all, "every job, on a and on b, to be dequeued")


def test_the_home_shard_down_pauses_its_partitions_and_the_others_serve_on() -> None:
    """The placements are cached: while the home shard (the catalog's) does not answer,
    the partitions on the other shard serve on."""
    with Runtime(CONFIG, shards=2) as rt:
        a = rt.node()
        a.create_queue("mail")
        before = [d for i in range(8) for d in a.enqueue("mail", job(b"j%d" % i))]
        rt.settle()
        rt.shards["a"].fail("the home shard's database is down")
        rt.clock.advance(3)  # past the placement cache's refresh
        rt.advance_until(
            lambda: sorted(a.serving()) == [("mail", 1), ("mail", 3)],
            "the owner to pause the partitions on a and serve the ones on b",
        )
        on_b = {d for d in before if parse(d).partition in (1, 3)}
        got: dict[str, bytes] = {}

        def served_on_b() -> bool:
            got.update(a.dequeue("mail", 50))
            return on_b <= set(got)

        rt.advance_until(served_on_b, "the jobs on b to be dequeued while a is down")
        rt.shards["a"].recover()
        rt.advance_until(
            lambda: sorted(a.serving()) == [("mail", p) for p in range(4)],
            "the partitions on a to serve again",
        )
