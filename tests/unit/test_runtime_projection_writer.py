"""The owner folds on its own thread and its projection writer commits (decision 0023):
the in-memory state is the authoritative one until the commit, every read of job state
from the store waits for the partition's commits, and a failed commit reloads the
partition from the log without losing anything."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pinledger.idl import pinlater
from pinledger.projections.store import PartitionBatch, StoreUnavailableError
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job, wait_until

RECOVERY_S = 2.0
# One partition; windows of 2 jobs per priority, refilled at 1.
SMALL = dataclasses.replace(TEST_CONFIG, partitions=1, ready_window=2 * TEST_CONFIG.max_priority)


class _Gate:
    """Holds the commits of batches holding an event of `kind` until released; `fail`
    makes held commits raise instead (once each)."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.fail = False
        self.batches: list[PartitionBatch] = []


@contextmanager
def _held_commits(rt: Runtime, kind: str) -> Iterator[_Gate]:
    gate = _Gate()
    store = rt.store
    commit = store.commit_partition_batch

    def held(batch: PartitionBatch) -> None:
        if any(e.type == kind for e in batch.events) and not gate.release.is_set():
            gate.holding.set()
            assert gate.release.wait(10), "the test never released the commit"
            if gate.fail:
                raise StoreUnavailableError("Postgres is unreachable (the test failed it)")
        gate.batches.append(batch)
        commit(batch)

    store.commit_partition_batch = held  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        gate.release.set()
        store.commit_partition_batch = commit  # type: ignore[method-assign]


def _serving(rt: Runtime, partitions: int) -> Node:
    node = rt.node()
    node.create_queue("mail")
    rt.wait_serving("mail", partitions, [node])
    rt.settle()
    return node


def test_an_ack_folded_while_the_claim_waits_for_its_commit_applies_to_the_claimed_job() -> None:
    # The acked job is IN_PROGRESS only in memory (the claim's batch is not committed):
    # the fold must read it there, not from the store, where it is still PENDING.
    with Runtime(SMALL) as rt:
        node = _serving(rt, 1)
        [enqueued] = node.enqueue("mail", job(b"x"))
        rt.settle()
        with _held_commits(rt, "clm") as gate:
            assert list(node.dequeue("mail", 1)) == [enqueued]
            assert gate.holding.wait(5), "the owner never folded the claim"
            node.ack("mail", succeeded=[enqueued])
            wait_until(
                lambda: rt.log.end_offsets([("rt.q.mail", 0)])[("rt.q.mail", 0)] == 3,
                "the ack in the log",
            )
            rt.wait_passes(2)
            gate.release.set()
        rt.settle()
        info = node.lookup(enqueued)
        assert info.jobState == pinlater.PinLaterJobState.SUCCEEDED
        steps = [(s.action, s.applied) for s in node.history(enqueued).steps]
        assert steps == [("Enqueued", True), ("Claimed", True), ("Succeeded", True)]


def test_a_refill_never_hands_out_a_job_claimed_in_a_batch_not_yet_committed() -> None:
    # Windows of 2. a and b are handed out and their claim is folded but not
    # committed. Jobs due earlier (d, e, f) then push the window's bound below a and b;
    # once d and e are handed out too, a refill reads past the bound: a store that
    # has not got the first claim shows a and b PENDING there. The refill must wait
    # for the commit (the owner thread blocks in the flush until the test releases it).
    with Runtime(SMALL) as rt:
        node = _serving(rt, 1)
        enqueued = node.enqueue("mail", job(b"a"), job(b"b"), job(b"c"))
        rt.settle()
        writer = node.owner.partitions.projection
        waits = writer.flush_waits
        seen: list[str] = []
        with _held_commits(rt, "clm") as gate:
            seen += node.dequeue("mail", 2)
            assert seen == enqueued[:2]
            assert gate.holding.wait(5), "the owner never folded the claim"
            earlier = rt.clock.now_ms() - 60_000
            enqueued += node.enqueue(
                "mail", *(job(x, run_after_ms=earlier) for x in (b"d", b"e", b"f"))
            )

            def refilled_or_waiting() -> bool:
                seen.extend(node.dequeue("mail", 2))
                return len(set(seen)) < len(seen) or writer.flush_waits > waits

            wait_until(refilled_or_waiting, "a refill (or the flush before it)")
            gate.release.set()
        for _ in range(4):
            rt.settle()
            seen += node.dequeue("mail", 10)
        assert len(set(seen)) == len(seen), f"handed out twice: {seen}"
        assert sorted(seen) == sorted(enqueued)


def test_a_failed_commit_reloads_the_partition_and_loses_nothing() -> None:
    with Runtime() as rt:
        node = _serving(rt, TEST_CONFIG.partitions)
        with _held_commits(rt, "enq") as gate:
            enqueued = node.enqueue("mail", job(b"a"))
            assert gate.holding.wait(5), "the owner never folded the enqueue"
            # More batches queue behind the held commit, to be discarded with it.
            enqueued += node.enqueue("mail", job(b"b"), job(b"c"))
            enqueued += node.enqueue("mail", job(b"d"))
            gate.fail = True
            gate.release.set()
        rt.advance_until(rt.projected, "the partition projected again", timeout_s=RECOVERY_S * 5)
        rt.settle()
        assert node.owner.alive and node.owner.unavailable is None
        handed: list[str] = []
        for _ in range(3):
            handed += list(node.dequeue("mail", 10))
            rt.settle()
        assert sorted(handed) == sorted(enqueued)
        for descriptor in enqueued:
            assert [s.action for s in node.history(descriptor).steps] == ["Enqueued", "Claimed"]


def test_batches_queued_during_a_commit_are_merged_into_one_transaction() -> None:
    with Runtime(dataclasses.replace(TEST_CONFIG, partitions=1)) as rt:
        node = _serving(rt, 1)
        writer = node.owner.partitions.projection
        with _held_commits(rt, "enq") as gate:
            enqueued = node.enqueue("mail", job(b"first"))
            assert gate.holding.wait(5), "the owner never folded the enqueue"
            commits = writer.commits
            for i in range(5):
                enqueued += node.enqueue("mail", job(b"%d" % i))
            wait_until(lambda: _queued(node) == 5, "five enqueues folded and queued")
            gate.release.set()
            rt.settle()
        # The held batch, then the five queued behind it in one transaction.
        assert writer.commits == commits + 2
        merged = [b for b in gate.batches if len(b.events) == 5]
        assert len(merged) == 1 and [e.type for e in merged[0].events] == ["enq"] * 5
        assert sorted(node.dequeue("mail", 10)) == sorted(enqueued)


def _queued(node: Node) -> int:
    """Timeline rows queued for a commit (the one in flight not counted)."""
    writer = node.owner.partitions.projection
    with writer._cond:
        return sum(lane.events for lane in writer._lanes.values())
