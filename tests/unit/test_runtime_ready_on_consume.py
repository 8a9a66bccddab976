"""A job is ready when its owner consumes its record, before the Postgres commit of
that batch (decision 0020): the record is durable in the log already. A commit that
then fails must not hand the job out a second time: the partition is reloaded and
serves again only after projecting the claim appended meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pinledger.projections.store import PartitionBatch, StoreUnavailableError
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

PARTITIONS = TEST_CONFIG.partitions
RECOVERY_S = 2.0


class _Gate:
    """Holds the commits of batches that hold an enqueue until released; `fail` makes
    the held commit raise instead."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.fail = False


@contextmanager
def _held_commits(rt: Runtime) -> Iterator[_Gate]:
    gate = _Gate()
    store = rt.store
    commit = store.commit_partition_batch

    def held(batch: PartitionBatch) -> None:
        if any(e.type == "enq" for e in batch.events) and not gate.release.is_set():
            gate.holding.set()
            assert gate.release.wait(10), "the test never released the commit"
            if gate.fail:
                raise StoreUnavailableError("Postgres is unreachable (the test failed it)")
        commit(batch)

    store.commit_partition_batch = held  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        gate.release.set()
        store.commit_partition_batch = commit  # type: ignore[method-assign]


def _serving(rt: Runtime) -> Node:
    node = rt.node()
    node.create_queue("mail")
    rt.wait_serving("mail", PARTITIONS, [node])
    rt.settle()
    return node


def test_a_job_is_handed_out_while_its_batch_is_still_being_committed() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        with _held_commits(rt) as gate:
            [enqueued] = node.enqueue("mail", job(b"early"))
            assert gate.holding.wait(5), "the owner never consumed the enqueue"
            # Postgres has not got the job, yet the owner hands it out.
            assert not rt.projected()
            assert node.dequeue("mail", 1) == {enqueued: b"early"}
            gate.release.set()
        rt.settle()
        steps = [s.action for s in node.history(enqueued).steps]
        assert steps == ["Enqueued", "Claimed"]
        assert node.dequeue("mail", 1) == {}


def test_a_failed_commit_after_the_hand_out_does_not_hand_the_job_out_again() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        with _held_commits(rt) as gate:
            [enqueued] = node.enqueue("mail", job(b"once"))
            assert gate.holding.wait(5), "the owner never consumed the enqueue"
            assert node.dequeue("mail", 1) == {enqueued: b"once"}
            gate.fail = True
            gate.release.set()
            # The pass fails; the owner reloads from Postgres, where the job is not yet.
        # While the partition catches up past the claim, nobody gets the job again.
        seen: list[str] = []

        def dequeued_until_projected() -> bool:
            seen.extend(node.dequeue("mail", 10))
            return rt.projected()

        rt.advance_until(
            dequeued_until_projected,
            "the owner to project the enqueue and the claim again",
            timeout_s=RECOVERY_S * 5,
        )
        rt.settle()
        seen.extend(node.dequeue("mail", 10))
        assert enqueued not in seen
        steps = [s.action for s in node.history(enqueued).steps]
        assert steps == ["Enqueued", "Claimed"]
        assert node.owner.alive
