"""Moving a partition between store shards on the fakes (issue 23, step 6; decision
0031): the mover replays the partition's log into the target, a `PartitionMoved` record
switches it, the owner serves it from the target, the old shard's rows go, and no job
is lost or handed out twice while jobs are enqueued, dequeued and acked throughout. A
move stopped half way resumes from the target's own offset."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections import Counter

import pytest

from pinledger.idl import pinlater
from pinledger.ledger import formats
from pinledger.ledger.descriptor import parse
from pinledger.ledger.log import queue_topic
from pinledger.projections.sharded_store import ShardedStore
from pinledger.service.shards.moves import Mover, MoveRefusedError
from pinledger.service.shards.shard_map import single
from pinledger.service.testing.runtime import GONE, TEST_CONFIG, Runtime, job
from tests.unit.test_runtime_shards import _held

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=4)
SUCCEEDED = pinlater.PinLaterJobState.SUCCEEDED


def _mover(rt: Runtime, said: list[str]) -> Mover:
    assert isinstance(rt.ledger_store, ShardedStore) and rt.shard_map is not None
    rt.writer.follow_format(formats.LATEST)
    return Mover(rt.ledger_store, rt.log, rt.writer, rt.shard_map, GONE, said.append, 0.2)


def test_a_partition_moves_under_load_and_no_job_is_lost_or_handed_out_twice() -> None:
    with Runtime(CONFIG, shards=2) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")  # partitions a, b, a, b
        enqueued = [d for i in range(40) for d in b.enqueue("mail", job(b"j%d" % i))]
        rt.settle()
        handed: Counter[str] = Counter()
        # Claimed before the move, acked after it: the target knows the claims.
        early = a.dequeue("mail", 12)
        handed.update(list(early))

        said: list[str] = []
        report: list[object] = []
        mover = threading.Thread(
            target=lambda: report.append(_mover(rt, said).move("mail", 0, "b", rt.clock.now_ms))
        )
        mover.start()
        while mover.is_alive():  # load throughout the move
            enqueued += b.enqueue("mail", job(b"during"))
            got = a.dequeue("mail", 3)
            handed.update(list(got))
            a.ack("mail", succeeded=list(got))
            rt.clock.advance(0.05)
            mover.join(0.01)
        assert report, f"the move failed: {said}"
        a.ack("mail", succeeded=list(early))

        def all_served() -> bool:
            got = a.dequeue("mail", 50)
            handed.update(list(got))
            a.ack("mail", succeeded=list(got))
            return set(handed) >= set(enqueued)

        rt.advance_until(all_served, "every job to be dequeued after the move")
        rt.settle()
        assert max(handed.values()) == 1, "a job was handed out twice"
        assert a.count("mail", SUCCEEDED) == len(enqueued)
        # Placed on b, every row of it there and none left on a; the switch offset said.
        assert rt.store.queues()[0].shards == ("b", "b", "a", "b")
        assert 0 not in _held(rt.shards["a"], "mail")
        assert _held(rt.shards["b"], "mail")[0] == sum(
            1 for d in enqueued if parse(d).partition == 0
        )
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        assert (topic, 0) not in rt.shards["a"].offsets([(topic, 0)])
        assert any("placed on 'b' at offset" in line for line in said), said
        # Lookups of the moved partition's jobs read b.
        moved = next(d for d in enqueued if parse(d).partition == 0)
        assert a.lookup(moved).jobState == SUCCEEDED


def test_a_move_stopped_half_way_resumes_from_the_targets_offset() -> None:
    with Runtime(CONFIG, shards=2) as rt:
        a = rt.node()
        a.create_queue("mail")
        for i in range(30):
            a.enqueue("mail", job(b"j%d" % i))
        rt.settle()
        said: list[str] = []
        mover = _mover(rt, said)
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        end = rt.log.end_offsets([(topic, 2)])[(topic, 2)]

        # The first run dies after its first progress line (a batch projected or not).
        def dies(line: str) -> None:
            said.append(line)
            if rt.shards["b"].offset(topic, 2) > 0:
                raise KeyboardInterrupt

        mover.say = dies
        ticks = itertools.count(0.0, 3.0)  # a progress line after every batch
        mover.clock = lambda: next(ticks)
        mover_batch = pytest.MonkeyPatch()
        mover_batch.setattr("pinledger.service.shards.moves.BATCH", 3)
        try:
            with pytest.raises(KeyboardInterrupt):
                mover.move("mail", 2, "b", rt.clock.now_ms)
        finally:
            mover_batch.undo()
        reached = rt.shards["b"].offset(topic, 2)
        assert 0 < reached < end
        assert rt.store.queues()[0].shards[2] == "a", "not switched by a run that died"

        mover.say, mover.clock = said.append, time.monotonic
        report = mover.move("mail", 2, "b", rt.clock.now_ms)
        assert f"mail[2]: resuming on 'b' from offset {reached}" in said
        assert report.records == end - reached
        rt.advance_until(lambda: ("mail", 2) in a.serving(), "partition 2 to serve from b")
        assert rt.store.queues()[0].shards[2] == "b"
        # Run again: nothing to replay, nothing left to remove.
        again = mover.move("mail", 2, "b", rt.clock.now_ms)
        assert again.switched_at is None and again.removed == 0


def test_moves_that_cannot_be_made_are_refused_and_draining_spreads_a_shard() -> None:
    with Runtime(CONFIG, shards=3) as rt:
        a = rt.node()
        a.create_queue("mail")  # a, b, c, a
        rt.settle()
        mover = _mover(rt, [])
        with pytest.raises(MoveRefusedError, match="no queue 'nope'"):
            mover.move("nope", 0, "b", rt.clock.now_ms)
        with pytest.raises(MoveRefusedError, match=r"partitions 0\.\.3, not 4"):
            mover.move("mail", 4, "b", rt.clock.now_ms)
        with pytest.raises(MoveRefusedError, match="no store shard 'z'"):
            mover.move("mail", 0, "z", rt.clock.now_ms)
        # Draining a: its two partitions go to b and c, one each (fewest first).
        assert mover.targets_off("a", rt.store.queues()) == [("mail", 0, "b"), ("mail", 3, "c")]


def test_a_store_that_is_one_database_refuses_every_move_saying_what_a_move_needs() -> None:
    with Runtime(CONFIG) as rt:
        rt.node().create_queue("mail")
        rt.settle()
        store = rt.ledger_store
        assert not store.supports_moves()
        assert dict(store.shards()) == {"": store}
        assert store.placed_store("mail", 1) == ("", store)
        # The map a deployment without one has: its one store, the shard "default".
        shard_map = single("postgresql://fake/default")
        with pytest.raises(MoveRefusedError, match=r"one database.*PINLEDGER_STORE_SHARDS"):
            Mover(store, rt.log, rt.writer, shard_map, GONE, print)


def test_a_partition_whose_log_lost_its_oldest_records_to_the_retention_is_not_moved() -> None:
    """With a retention, a delayed job's (or a failed job's, kept for its TTL) enqueue
    record may be gone from the log while the job lives on in the store: a target rebuilt
    from the log would lack it, and it would be gone after the switch."""
    with Runtime(CONFIG, shards=2) as rt:
        a = rt.node()
        a.create_queue("mail")  # partitions a, b, a, b
        later = rt.clock.now_ms() + 86_400_000
        [delayed] = a.enqueue("mail", job(b"tomorrow", run_after_ms=later))
        for _ in range(3):
            a.enqueue("mail", job(b"filler"))
        rt.settle()
        found = parse(delayed)
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        rt.log.remove_records_before(topic, found.partition, found.offset + 1)
        target = "b" if found.partition in (0, 2) else "a"
        said: list[str] = []
        with pytest.raises(MoveRefusedError, match=r"retention removed the older ones"):
            _mover(rt, said).move("mail", found.partition, target, rt.clock.now_ms)
        # Nothing switched: the partition stays where it was, its job with it.
        assert rt.store.queues()[0].shard_of(found.partition) != target
        assert a.lookup(delayed) is not None


def test_a_move_stopped_after_its_switch_waits_before_cleaning_and_never_cleans_a_live_shard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Runtime(CONFIG, shards=3) as rt:
        a = rt.node()
        a.create_queue("mail")  # a, b, c, a
        for i in range(20):
            a.enqueue("mail", job(b"j%d" % i))
        rt.settle()
        said: list[str] = []
        mover = _mover(rt, said)
        topic = queue_topic(CONFIG.topic_prefix, "mail")

        def killed(_: float) -> None:
            if rt.store.queues()[0].shards[0] == "b":
                raise KeyboardInterrupt  # during the wait after the switch

        monkeypatch.setattr("pinledger.service.shards.moves.time.sleep", killed)
        with pytest.raises(KeyboardInterrupt):
            mover.move("mail", 0, "b", rt.clock.now_ms)
        assert rt.store.queues()[0].shards[0] == "b"
        assert rt.shards["a"].offsets([(topic, 0)]), "nothing removed yet"
        monkeypatch.undo()

        # Run again: the servers may not have followed yet, so it waits first.
        report = mover.move("mail", 0, "b", rt.clock.now_ms)
        assert report.switched_at is None and report.removed > 0
        assert "mail[0] is on 'b'; waiting 0 s before removing it elsewhere" in said

        # A mover of an older move (to a) must not clean where the partition lives now.
        rt.advance_until(lambda: ("mail", 0) in a.serving(), "partition 0 to serve from b")
        held = _held(rt.shards["b"], "mail")[0]
        assert mover._clean("mail", topic, 0, "a") == 0
        assert "mail[0] moved on from 'a' meanwhile" in said[-1]
        assert _held(rt.shards["b"], "mail")[0] == held
