"""cancelJobs on the fakes (decision 0036): a PENDING job and a running one end FAILED
with the cancel in their custom status; the running job's worker hears it at its next
checkpoint; its late ack changes nothing; a finished job is not cancelled; the history
names the canceller; below ledger format 3 a cancel is refused."""

from __future__ import annotations

from typing import Any

import pytest

from pinledger.idl import pinlater
from pinledger.ledger import formats
from pinledger.service.testing.runtime import CALLER, Node, Runtime, job

State = pinlater.PinLaterJobState
OPERATOR = pinlater.RequestContext(source="ops:alice", requestId="op-1")


def _cancel(rt: Runtime, node: Node, descriptors: list[str], reason: str = "") -> list[str]:
    request = pinlater.PinLaterCancelJobsRequest(
        queueName="mail", jobDescriptors=descriptors, reason=reason
    )
    answer: Any = rt.call_waiting(lambda: node.handler.cancelJobs(OPERATOR, request))
    return list(answer.cancelledJobDescriptors)


def test_cancel_a_pending_and_a_running_job_and_the_worker_hears_it() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        running, waiting, done = node.enqueue(
            "mail", job(b"a", attempts=3), job(b"b", attempts=3), job(b"c")
        )
        rt.settle()
        claimed = list(node.dequeue("mail", 3))
        assert set(claimed) == {running, waiting, done}
        node.ack("mail", succeeded=[done])
        node.checkpoint("mail", waiting)
        # Back to PENDING for `waiting`: a release checkpoint.
        node.handler.checkpointJobs(
            CALLER,
            pinlater.PinLaterCheckpointJobsRequest(
                queueName="mail",
                requests=[
                    pinlater.PinLaterCheckpointJobRequest(
                        jobDescriptor=waiting, moveToPending=True, runAfterTimestampMillis=2**40
                    )
                ],
            ),
        )
        rt.settle()
        assert node.lookup(waiting).jobState == State.PENDING

        answered = _cancel(rt, node, [running, waiting, done], reason="wrong body")
        assert answered == [running, waiting]  # the SUCCEEDED one is left as it is
        for descriptor in (running, waiting):
            info = node.lookup(descriptor)
            assert info.jobState == State.FAILED
            assert info.attemptsRemaining == 0
            assert info.customStatus.startswith("cancelled by ops:alice: wrong body")
        assert node.lookup(done).jobState == State.SUCCEEDED

        # The worker's next heartbeat is told, by descriptor, in the pinledger field.
        with pytest.raises(pinlater.PinLaterException) as told:
            node.checkpoint("mail", running)
        assert told.value.errorCode == pinlater.ErrorCode.UNKNOWN
        assert told.value.cancelledJobDescriptors == [running]
        assert "cancelled" in told.value.message

        # Its late ack changes nothing.
        node.ack("mail", succeeded=[running])
        rt.settle()
        info = node.lookup(running)
        assert info.jobState == State.FAILED
        assert info.customStatus.startswith("cancelled by ops:alice")
        steps = node.history(running).steps
        cancel = next(s for s in steps if s.action == "Cancelled")
        assert (cancel.applied, cancel.source, cancel.requestId) == (True, "ops:alice", "op-1")
        assert (steps[-1].action, steps[-1].applied) == ("Succeeded", False)
        # Cancelling again answers it as cancelled, and appends nothing that applies.
        assert _cancel(rt, node, [running]) == [running]


def test_a_checkpoint_of_several_jobs_renews_the_others() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        kept, gone = node.enqueue("mail", job(b"a"), job(b"b"))
        rt.settle()
        node.dequeue("mail", 2)
        rt.settle()
        assert _cancel(rt, node, [gone]) == [gone]
        request = pinlater.PinLaterCheckpointJobsRequest(
            queueName="mail",
            requests=[
                pinlater.PinLaterCheckpointJobRequest(jobDescriptor=d, prependCustomStatus="p ")
                for d in (kept, gone)
            ],
        )
        with pytest.raises(pinlater.PinLaterException) as told:
            node.handler.checkpointJobs(CALLER, request)
        assert told.value.cancelledJobDescriptors == [gone]
        rt.settle()
        assert node.lookup(kept).customStatus.startswith("p ")
        assert node.lookup(kept).jobState == State.IN_PROGRESS


def test_a_cancel_below_ledger_format_3_is_refused() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        [descriptor] = node.enqueue("mail", job(b"a"))
        rt.settle()
        node.handler.api.writer.cluster_format = formats.GROUPED
        with pytest.raises(pinlater.PinLaterException) as refused:
            _cancel(rt, node, [descriptor])
        assert "ledger format 3" in refused.value.message
        assert node.lookup(descriptor).jobState == State.PENDING


def test_a_descriptor_of_another_queue_is_refused() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        node.create_queue("other")
        [descriptor] = node.enqueue("other", job(b"a"))
        rt.settle()
        with pytest.raises(pinlater.PinLaterException) as refused:
            _cancel(rt, node, [descriptor])
        assert "belongs to queue 'other'" in refused.value.message
