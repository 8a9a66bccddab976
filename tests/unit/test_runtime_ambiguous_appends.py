"""A claim append reported failed may be in the log all the same (an acknowledgement
lost, a timeout after which the record lands): its jobs must never go to another
worker before the projection shows whether the claim landed. Only a failure that
certainly wrote nothing gives them back at once. On the fakes (issue 38)."""

from __future__ import annotations

from typing import Any

import pytest

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

FIRST = pinlater.RequestContext(source="worker:first", requestId="a")
SECOND = pinlater.RequestContext(source="worker:second", requestId="b")


def _serving(rt: Runtime) -> Node:
    node = rt.node()
    node.create_queue("mail")
    rt.wait_serving("mail", TEST_CONFIG.partitions, [node])
    rt.settle()
    return node


def _dequeue(node: Node, caller: Any, limit: int = 5) -> dict[str, bytes]:
    request = pinlater.PinLaterDequeueRequest(queueName="mail", limit=limit)
    jobs: dict[str, bytes] = node.handler.dequeueJobs(caller, request).jobs
    return jobs


def _ack(node: Node, caller: Any, descriptor: str) -> None:
    request = pinlater.PinLaterJobAckRequest(
        queueName="mail", jobsSucceeded=[pinlater.PinLaterJobAckInfo(jobDescriptor=descriptor)]
    )
    node.handler.ackDequeuedJobs(caller, request)


def _failed_dequeue(node: Node, caller: Any) -> None:
    with pytest.raises(pinlater.PinLaterException) as raised:
        _dequeue(node, caller)
    assert raised.value.errorCode == pinlater.ErrorCode.SHARD_CONNECTION_FAILED


def test_a_claim_written_but_reported_failed_never_hands_the_job_to_another_worker() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        [d] = node.enqueue("mail", job(b"once", attempts=2))
        rt.settle()
        rt.log.lose_answers(1)
        _failed_dequeue(node, FIRST)  # its claim is in the log all the same
        assert _dequeue(node, SECOND) == {}, "the job went to a second worker"
        rt.settle()
        # The first claim is projected: the job is the first worker's, which was told
        # the dequeue failed, so nobody runs it until its claim times out.
        assert node.lookup(d).jobState == pinlater.PinLaterJobState.IN_PROGRESS
        assert _dequeue(node, SECOND) == {}
        rt.clock.advance(TEST_CONFIG.claim_timeout_s + 1)
        rt.settle()
        assert list(_dequeue(node, SECOND)) == [d]
        rt.settle()
        _ack(node, SECOND, d)
        rt.settle()
        # The final state follows the worker that held the claim, and no event was
        # rejected: never two live claims on the job.
        assert node.lookup(d).jobState == pinlater.PinLaterJobState.SUCCEEDED
        steps = node.history(d).steps
        assert [(s.action, s.source, s.applied) for s in steps] == [
            ("Enqueued", "worker:runtime-test", True),
            ("Claimed", "worker:first", True),
            ("TimedOut", "pinledger:owner", True),
            ("Claimed", "worker:second", True),
            ("Succeeded", "worker:second", True),
        ]


def test_a_claim_that_did_not_land_frees_its_jobs_once_the_log_end_is_read() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        [d] = node.enqueue("mail", job(b"later"))
        rt.settle()
        # Kafka down: the claim is not written, the error cannot say so, and the log's
        # end cannot be read either.
        rt.log.fail("Kafka is down", operations=["append", "end_offsets"])
        _failed_dequeue(node, FIRST)
        rt.log.fail("Kafka is down", operations=["end_offsets"])
        rt.wait_passes(3)
        assert _dequeue(node, SECOND) == {}, "released on a guess while the end was unknown"
        rt.log.heal()
        got: dict[str, bytes] = {}

        def handed_out() -> bool:
            got.update(_dequeue(node, SECOND))
            return bool(got)

        # The owner reads the end again a second (of the clock) after it failed.
        rt.advance_until(handed_out, "the job to be handed out once the end was read")
        assert list(got) == [d]


def test_a_claim_certainly_not_written_gives_its_jobs_back_at_once() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        [d] = node.enqueue("mail", job(b"again"))
        rt.settle()
        rt.log.fail("refused before sending", operations=["append", "end_offsets"], certain=True)
        _failed_dequeue(node, FIRST)
        rt.log.heal()
        assert list(_dequeue(node, SECOND)) == [d]
