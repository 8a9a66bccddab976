"""The owners' ready windows on the fakes: a backlog larger than the window is served
whole and in dequeue order while the owner never holds more than the window; delayed
jobs enter when due; acks, timeouts and takeovers act on jobs the owner does not hold;
a dequeue's piggybacked acks share its claim's record
(docs/decisions/0014-ready-window.md)."""

from __future__ import annotations

import dataclasses

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

# Two ready jobs per priority (three priorities) per partition.
WINDOW = 6
CONFIG = dataclasses.replace(TEST_CONFIG, partitions=1, ready_window=WINDOW)


def held(node: Node) -> int:
    """The most ready jobs one of the node's partitions holds in memory."""
    with node.owner.partitions.lock:
        return max((len(o.buffer) for o in node.owner.partitions.owned.values()), default=0)


def drain(rt: Runtime, node: Node, limit: int, most: int = 1000) -> list[str]:
    """Dequeue until nothing comes, letting the owner refill in between; checks the
    memory bound on the way."""
    served: list[str] = []
    for _ in range(most):
        got = list(node.dequeue("mail", limit))
        assert held(node) <= WINDOW
        if not got:
            rt.settle()
            got = list(node.dequeue("mail", limit))
            if not got:
                return served
        served += got
        rt.settle()
    raise AssertionError("the queue did not drain")


def test_a_backlog_larger_than_the_window_is_served_whole_in_order() -> None:
    with Runtime(CONFIG) as rt:
        node = rt.node()
        node.create_queue("mail")
        now = rt.clock.now_ms()
        jobs = [job(b"%d" % i, run_after_ms=now - 1000 + i) for i in range(40)]
        enqueued = node.enqueue("mail", *jobs)
        rt.settle()
        assert held(node) <= WINDOW
        assert drain(rt, node, limit=3) == enqueued
        assert node.count("mail") == 0


def test_a_job_ahead_of_the_window_and_a_higher_priority_are_served_first() -> None:
    with Runtime(CONFIG) as rt:
        node = rt.node()
        node.create_queue("mail")
        now = rt.clock.now_ms()
        backlog = node.enqueue("mail", *[job(b"b", run_after_ms=now - 100) for _ in range(20)])
        rt.settle()
        [urgent] = node.enqueue("mail", job(b"older", run_after_ms=now - 5000))
        [low] = node.enqueue("mail", job(b"low", priority=2, run_after_ms=now - 9000))
        rt.settle()
        assert list(node.dequeue("mail", 1)) == [urgent]
        served = drain(rt, node, limit=4)
        assert served == [*backlog, low]


def test_delayed_jobs_enter_when_due() -> None:
    with Runtime(CONFIG) as rt:
        node = rt.node()
        node.create_queue("mail")
        now = rt.clock.now_ms()
        [later] = node.enqueue("mail", job(b"later", run_after_ms=now + 20_000))
        due = node.enqueue("mail", *[job(b"due", run_after_ms=now - 100) for _ in range(10)])
        rt.settle()
        assert drain(rt, node, limit=2) == due  # the delayed one waits
        rt.clock.advance(25)  # (within the claim timeout)
        rt.settle()
        assert list(node.dequeue("mail", 5)) == [later]


def test_acks_of_jobs_the_owner_does_not_hold_are_applied() -> None:
    with Runtime(CONFIG) as rt:
        node = rt.node()
        node.create_queue("mail")
        enqueued = node.enqueue("mail", *[job(b"x") for _ in range(12)])
        rt.settle()
        served = drain(rt, node, limit=5)
        assert served == enqueued
        # Claimed jobs are IN_PROGRESS: only in the store, not in the owner's memory.
        assert held(node) == 0
        node.ack("mail", succeeded=served[:8], failed=served[8:])
        rt.settle()
        states = [node.lookup(d).jobState for d in served]
        assert (
            states
            == [pinlater.PinLaterJobState.SUCCEEDED] * 8 + [pinlater.PinLaterJobState.PENDING] * 4
        )
        assert sorted(drain(rt, node, limit=5)) == sorted(served[8:])  # failed: retried


def test_a_new_owner_serves_from_a_window_and_times_out_claims_it_never_held() -> None:
    with Runtime(CONFIG) as rt:
        first = rt.node()
        first.create_queue("mail")
        enqueued = first.enqueue("mail", *[job(b"y") for _ in range(30)])
        rt.settle()
        running = list(first.dequeue("mail", 2))
        assert running == enqueued[:2]
        rt.settle()
        first.stop()

        second = rt.node()
        rt.wait_serving("mail", 1, [second])
        rt.settle()
        assert held(second) <= WINDOW  # a window, not the backlog of 28
        assert drain(rt, second, limit=4) == enqueued[2:]
        second.ack("mail", succeeded=enqueued[2:])
        rt.settle()
        # The first server's claims were never in the second's memory: they time out.
        rt.clock.advance(CONFIG.claim_timeout_s + 1)
        rt.settle()
        assert sorted(drain(rt, second, limit=4)) == sorted(running)


def test_a_dequeue_appends_its_piggybacked_acks_and_its_claim_as_one_record() -> None:
    with Runtime(CONFIG) as rt:
        node = rt.node()
        node.create_queue("mail")
        [first, second] = node.enqueue("mail", job(b"1"), job(b"2"))
        rt.settle()
        assert list(node.dequeue("mail", 1)) == [first]
        records = node.writer.group.records
        # One partition: the ack of the first job and the claim of the second share
        # one record, so the call costs one round trip.
        assert list(node.dequeue("mail", 1, succeeded=[first])) == [second]
        assert node.writer.group.records == records + 1
        rt.settle()
        assert node.lookup(first).jobState == pinlater.PinLaterJobState.SUCCEEDED
        assert node.lookup(second).jobState == pinlater.PinLaterJobState.IN_PROGRESS
        # With nothing left to claim, the acks are appended all the same.
        assert node.dequeue("mail", 1, failed=[second]) == {}
        rt.settle()
        assert node.lookup(second).jobState != pinlater.PinLaterJobState.IN_PROGRESS
