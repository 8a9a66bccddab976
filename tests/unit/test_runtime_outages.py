"""Dependency outages on the fakes: while the store or the log is down, calls that need
it fail with SHARD_CONNECTION_FAILED and the owner loop keeps running; once it is back,
the same owner resumes projecting and serving, without a restart."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job, wait_until

PARTITIONS = TEST_CONFIG.partitions
# Real time allowed for a recovery that takes milliseconds when it happens.
RECOVERY_S = 2.0


def _serving(rt: Runtime) -> Node:
    node = rt.node()
    node.create_queue("mail")
    rt.wait_serving("mail", PARTITIONS, [node])
    rt.settle()
    return node


def _serves_again(rt: Runtime, node: Node, pending: Sequence[str] = ()) -> None:
    """The owner serves every partition again (the clock moves: the loop pauses after
    a failed pass): jobs enqueued now, one per partition, and the `pending` ones are
    dequeued, and their claims projected."""
    everything = [("mail", p) for p in range(PARTITIONS)]
    rt.advance_until(
        lambda: node.serving() == everything, "the owner to serve again", timeout_s=RECOVERY_S
    )
    jobs = [d for i in range(PARTITIONS) for d in node.enqueue("mail", job(b"%d" % i))]
    jobs.extend(pending)
    rt.settle(RECOVERY_S)
    assert set(node.dequeue("mail", len(jobs) + 1)) == set(jobs)
    rt.settle(RECOVERY_S)
    assert {node.lookup(d).jobState for d in jobs} == {pinlater.PinLaterJobState.IN_PROGRESS}


def test_the_owner_resumes_after_the_store_was_down() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        rt.store.fail()
        [during] = node.enqueue("mail", job(b"during"))  # the log takes it
        wait_until(lambda: node.serving() == [], "the owner to notice the store is down")
        assert node.owner.alive
        # A dequeue meanwhile says why it gets nothing, instead of an empty answer.
        with pytest.raises(pinlater.PinLaterException) as raised:
            node.dequeue("mail", 1)
        assert raised.value.errorCode == pinlater.ErrorCode.SHARD_CONNECTION_FAILED
        assert "Postgres is unreachable" in raised.value.message

        rt.store.recover()
        _serves_again(rt, node, pending=[during])
        assert node.owner.alive


def test_the_owner_resumes_after_the_log_was_down() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        rt.log.fail()
        with pytest.raises(pinlater.PinLaterException) as refused:
            node.enqueue("mail", job(b"refused"))
        assert refused.value.errorCode == pinlater.ErrorCode.SHARD_CONNECTION_FAILED
        wait_until(lambda: node.serving() == [], "the owner to notice the log is down")
        assert node.owner.alive

        rt.log.heal()
        _serves_again(rt, node)
        assert node.owner.alive


def test_the_owner_resumes_after_appends_failed_for_a_while() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        [claimed] = node.enqueue("mail", job(b"claimed"))
        rt.settle()
        assert list(node.dequeue("mail", 1)) == [claimed]
        rt.settle()
        rt.log.fail(operations=["append"])
        # The claim times out, but the timeout cannot be appended: the pass fails.
        rt.clock.advance(TEST_CONFIG.claim_timeout_s)
        wait_until(lambda: node.serving() == [], "the owner to notice appends fail")
        assert node.owner.alive

        rt.log.heal()
        _serves_again(rt, node, pending=[claimed])  # its timeout appended at last
        steps = node.history(claimed).steps
        assert [s.action for s in steps] == ["Enqueued", "Claimed", "TimedOut", "Claimed"]
