"""Adoption on the fakes: jobs put in the log while no server owns their partition are
served once an owner joins, in dequeue order (priority, then run_after, then log
order); an owner taking over loads what the projection holds and catches up on the
rest of the log."""

from __future__ import annotations

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Runtime, job


def test_jobs_enqueued_before_any_owner_are_served_in_dequeue_order() -> None:
    with Runtime() as rt:
        rt.create_queue("mail", partitions=1)  # by a server that has gone away
        node = rt.node(start=False)  # its API takes jobs before its owner joins
        now = rt.clock.now_ms()
        [low] = node.enqueue("mail", job(b"low", priority=2, run_after_ms=now - 1000))
        [first] = node.enqueue("mail", job(b"first", run_after_ms=now - 2000))
        [tie_a] = node.enqueue("mail", job(b"tie-a", run_after_ms=now - 500))
        [tie_b] = node.enqueue("mail", job(b"tie-b", run_after_ms=now - 500))
        [lowest] = node.enqueue("mail", job(b"lowest", priority=3, run_after_ms=now - 9000))
        [later] = node.enqueue("mail", job(b"later", run_after_ms=now + 20_000))
        assert rt.store.queues() == []  # nobody has projected anything

        node.start()
        rt.wait_serving("mail", 1, [node])
        served = [list(node.dequeue("mail", 1)) for _ in range(6)]

        assert served == [[first], [tie_a], [tie_b], [low], [lowest], []]
        rt.clock.advance(20)  # within the claim timeout: the claims above stand
        assert rt.clock.now_ms() - now < TEST_CONFIG.claim_timeout_s * 1000
        assert list(node.dequeue("mail", 5)) == [later]


def test_an_owner_taking_over_loads_the_projection_and_catches_up_on_the_log() -> None:
    with Runtime() as rt:
        first = rt.node()
        first.create_queue("mail")
        [running, waiting] = first.enqueue("mail", job(b"running"), job(b"waiting"))
        rt.settle()
        assert list(first.dequeue("mail", 1)) == [running]
        rt.settle()
        first.stop()  # its projection stays in the store

        second = rt.node(start=False)
        [fresh] = second.enqueue("mail", job(b"fresh"))  # only in the log
        second.start()
        rt.wait_serving("mail", TEST_CONFIG.partitions, [second])

        assert second.dequeue("mail", 5) == {waiting: b"waiting", fresh: b"fresh"}
        rt.settle()
        claimed = second.lookup(running)
        assert claimed.jobState == pinlater.PinLaterJobState.IN_PROGRESS
        assert claimed.claimDescriptor.startswith("s1:")  # still the first server's claim
