"""Claim timeouts on the fakes: a claim not renewed within the claim timeout becomes a
TimedOut record the owner appends, and the job is PENDING again with one attempt used,
or FAILED when that was its last; a heartbeat (a checkpoint) before the deadline keeps
the claim."""

from __future__ import annotations

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

TIMEOUT_S = TEST_CONFIG.claim_timeout_s
State = pinlater.PinLaterJobState


def _state(rt: Runtime, node: Node, descriptor: str) -> int:
    rt.settle()
    info = node.lookup(descriptor)
    state: int = info.jobState
    return state


def _serving(rt: Runtime) -> Node:
    node = rt.node()
    node.create_queue("mail")
    return node


def _claimed(rt: Runtime, node: Node, attempts: int) -> str:
    """A job enqueued and dequeued (claimed) now, and its claim projected now (as an
    owner does within milliseconds: it times a claim out from when it saw it, too)."""
    [d] = node.enqueue("mail", job(b"x", attempts=attempts))
    rt.settle()
    assert list(node.dequeue("mail", 1)) == [d]
    rt.settle()
    return d


def test_a_claim_not_renewed_in_time_times_out_and_the_job_is_pending_again() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        d = _claimed(rt, node, attempts=2)

        rt.clock.advance(TIMEOUT_S)
        rt.settle()
        info = node.lookup(d)
        assert info.jobState == State.PENDING
        assert (info.attemptsAllowed, info.attemptsRemaining) == (2, 1)
        steps = node.history(d).steps
        assert [s.action for s in steps] == ["Enqueued", "Claimed", "TimedOut"]
        assert steps[-1].source == "pinledger:owner" and steps[-1].applied
        # Served again at once: a timeout adds no delay.
        assert list(node.dequeue("mail", 1)) == [d]


def test_a_claim_timing_out_on_the_last_attempt_fails_the_job() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        d = _claimed(rt, node, attempts=1)

        rt.clock.advance(TIMEOUT_S + 1)
        rt.settle()
        info = node.lookup(d)
        assert (info.jobState, info.attemptsRemaining) == (State.FAILED, 0)
        assert node.dequeue("mail", 1) == {}


def test_a_heartbeat_before_the_deadline_keeps_the_claim() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        [beating, silent] = node.enqueue("mail", job(b"beating"), job(b"silent"))
        rt.settle()
        assert set(node.dequeue("mail", 2)) == {beating, silent}
        rt.settle()

        rt.clock.advance(TIMEOUT_S - 5)
        node.checkpoint("mail", beating)
        rt.settle()
        rt.clock.advance(10)  # past the first deadline, not the renewed one
        # The silent claim timing out shows the owner has checked both at this time.
        assert _state(rt, node, silent) == State.PENDING
        assert _state(rt, node, beating) == State.IN_PROGRESS

        rt.clock.advance(TIMEOUT_S)  # past the renewed deadline too
        assert _state(rt, node, beating) == State.PENDING
