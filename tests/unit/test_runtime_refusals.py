"""A request carrying text no store can hold (ledger/limits.py) is refused at the edge and
appends nothing, so its queue, and every other, keeps serving (issue 38: a NUL in a
custom status was appended, and Postgres then refused the owner's commit for good).
On the fakes: the FakeStore refuses what Postgres and MariaDB refuse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger.limits import MAX_RETRY_DELAY_MS
from pinledger.service.testing.runtime import CALLER, Node, Runtime, job

E = p.ErrorCode
Call = Callable[[Node, str], object]


def _enqueue(status: str) -> Call:
    def call(node: Node, _: str) -> object:
        jobs = [job(b"fine"), p.PinLaterJob(body=b"x", customStatus=status)]
        return node.handler.enqueueJobs(
            CALLER, p.PinLaterEnqueueRequest(queueName="mail", jobs=jobs)
        )

    return call


def _enqueue_from(source: str) -> Call:
    def call(node: Node, _: str) -> object:
        request = p.PinLaterEnqueueRequest(queueName="mail", jobs=[job(b"x")])
        return node.handler.enqueueJobs(p.RequestContext(source=source), request)

    return call


def _ack(**info: Any) -> Call:
    def call(node: Node, claimed: str) -> object:
        acks = [p.PinLaterJobAckInfo(jobDescriptor=claimed, **info)]
        request = p.PinLaterJobAckRequest(queueName="mail", jobsFailed=acks)
        return node.handler.ackDequeuedJobs(CALLER, request)

    return call


def _checkpoint(**item: Any) -> Call:
    def call(node: Node, claimed: str) -> object:
        checkpoint = p.PinLaterCheckpointJobRequest(jobDescriptor=claimed, **item)
        request = p.PinLaterCheckpointJobsRequest(queueName="mail", requests=[checkpoint])
        return node.handler.checkpointJobs(CALLER, request)

    return call


REFUSED: list[tuple[str, Call, int, str]] = [
    ("a NUL in a custom status", _enqueue("done\x00"), E.ENQUEUE_REJECTED, "job 1: customStatus"),
    ("an unpaired surrogate in a status", _enqueue("\udc80"), E.ENQUEUE_REJECTED, "surrogate"),
    ("a NUL in the caller's source", _enqueue_from("w\x00"), E.UNKNOWN, "RequestContext.source"),
    ("a source past its limit", _enqueue_from("w" * 1025), E.UNKNOWN, "the limit is 1024"),
    ("a NUL in an appended status", _ack(appendCustomStatus="\x00"), E.UNKNOWN, "appendCustom"),
    ("a NUL in a prepended status", _checkpoint(prependCustomStatus="\x00"), E.UNKNOWN, "prepend"),
    ("a surrogate in a new body", _checkpoint(newBody="\ud800"), E.UNKNOWN, "newBody"),
    (
        "a retry delay past a bigint's run_after",
        _ack(retryDelayMillis=2**63 - 1),
        E.UNKNOWN,
        f"maximum of {MAX_RETRY_DELAY_MS}",
    ),
]


@pytest.mark.parametrize(
    ("call", "code", "said"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_a_refused_request_appends_nothing_and_the_queues_serve_on(
    call: Call, code: int, said: str
) -> None:
    with Runtime() as rt:
        node = rt.node()
        for name in ("mail", "other"):
            node.create_queue(name)
        [claimed] = node.enqueue("mail", job(b"claimed"))
        rt.settle()
        assert list(node.dequeue("mail", 1)) == [claimed]
        rt.settle()
        before = rt.ends()
        with pytest.raises(p.PinLaterException) as raised:
            call(node, claimed)
        assert raised.value.errorCode == code and said in raised.value.message
        assert rt.ends() == before
        # Both queues serve on: a job each, enqueued, dequeued, acked and projected.
        node.ack("mail", succeeded=[claimed])
        for name in ("mail", "other"):
            [descriptor] = node.enqueue(name, job(name.encode()))
            rt.settle()
            assert node.dequeue(name, 1) == {descriptor: name.encode()}
            node.ack(name, succeeded=[descriptor])
        rt.settle()
        assert node.lookup(claimed).jobState == p.PinLaterJobState.SUCCEEDED


def test_a_status_past_5000_characters_is_truncated_not_refused() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        long = "é" * 6000
        [descriptor] = node.enqueue("mail", p.PinLaterJob(body=b"x", customStatus=long))
        rt.settle()
        assert node.lookup(descriptor).customStatus == "é" * 5000
