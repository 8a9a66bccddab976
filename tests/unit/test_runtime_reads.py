"""Reads never answer from a projection nobody is advancing as if it were current:
when the projection cannot reach what a read needs within the read wait, the call fails
with SHARD_CONNECTION_FAILED saying so (tests/unit on the fakes, no sleeps)."""

from __future__ import annotations

import pytest

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job


def _serving(rt: Runtime) -> Node:
    node = rt.node()
    node.create_queue("mail")
    rt.wait_serving("mail", TEST_CONFIG.partitions, [node])
    rt.settle()
    return node


def test_reads_see_every_record_in_the_log_as_of_the_call() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        other = rt.node()  # another server enqueues; this one counts
        other.enqueue("mail", job(b"a"), job(b"b"))
        assert node.count("mail") == 2


def test_a_lookup_the_projection_cannot_serve_fails_instead_of_answering_stale() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        node.freeze()  # the owner stops projecting; its partitions are not reassigned yet
        [d] = node.enqueue("mail", job(b"after the owner stopped"))
        with pytest.raises(pinlater.PinLaterException) as raised:
            node.lookup(d)
        assert raised.value.errorCode == pinlater.ErrorCode.SHARD_CONNECTION_FAILED
        assert "the projection is behind the log" in raised.value.message
        assert "PINLEDGER_READ_WAIT_S" in raised.value.message


def test_a_count_the_projection_cannot_serve_fails_instead_of_a_stale_number() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        node.enqueue("mail", job(b"seen"))
        rt.settle()
        assert node.count("mail") == 1
        node.freeze()
        rt.node(start=False).enqueue("mail", job(b"not projected"))
        with pytest.raises(pinlater.PinLaterException) as raised:
            node.count("mail")
        assert raised.value.errorCode == pinlater.ErrorCode.SHARD_CONNECTION_FAILED
        assert "needs" in raised.value.message
