"""Unique jobs through the server on the fakes (decision 0037): a keyed enqueue creates
its job once per key, answers the holder's descriptor otherwise, from any server and
in any mix with plain jobs; a finished holder frees its key, or holds it for the
queue's uniqueForSeconds; a resize never moves a key."""

from __future__ import annotations

import pytest

from pinledger.idl import pinlater
from pinledger.service.queue_config import parse_queue_config
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job


def _serving(rt: Runtime, partitions: int = TEST_CONFIG.partitions) -> Node:
    node = rt.node()
    node.create_queue("mail")
    rt.wait_serving("mail", partitions, [node])
    rt.settle()
    return node


def test_a_key_makes_one_job_and_every_enqueue_of_it_is_answered_that_job() -> None:
    with Runtime() as rt:
        a = _serving(rt)
        b = rt.node()
        [first] = a.enqueue("mail", job(b"report 7", unique_key="report:7"))
        [again] = b.enqueue("mail", job(b"report 7, again", unique_key="report:7"))
        assert again == first
        # A batch mixing taken keys, new keys, a key twice and plain jobs: one answer
        # per job, in the request's order.
        answers = a.enqueue(
            "mail",
            job(b"plain"),
            job(b"report 7 in a batch", unique_key="report:7"),
            job(b"report 8", unique_key="report:8"),
            job(b"report 8 twice", unique_key="report:8"),
            job(b"plain too"),
        )
        assert len(answers) == 5
        assert answers[1] == first
        assert answers[3] == answers[2] != first
        assert len(set(answers)) == 4
        rt.settle()
        assert a.count("mail") == 4  # first, report 8, two plain jobs
        info = a.lookup(first)
        assert info.uniqueKey == "report:7"
        assert a.lookup(answers[0]).uniqueKey is None


def test_a_finished_holder_frees_its_key_unless_the_queue_keeps_it() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        [first] = node.enqueue("mail", job(b"x", unique_key="k"))
        rt.settle()
        got = node.dequeue("mail", 10)
        assert list(got) == [first]
        node.ack("mail", succeeded=[first])
        rt.settle()
        [second] = node.enqueue("mail", job(b"y", unique_key="k"))
        assert second != first  # the key was free once its job succeeded

        node.queue_config = parse_queue_config(
            '{"queues": [{"name": "mail", "queueConfig": {"uniqueForSeconds": 60}}]}'
        )
        rt.settle()
        assert list(node.dequeue("mail", 10)) == [second]
        node.ack("mail", succeeded=[second])
        rt.settle()
        [third] = node.enqueue("mail", job(b"z", unique_key="k"))
        assert third == second  # within a minute of its success
        rt.clock.advance(61)
        [fourth] = node.enqueue("mail", job(b"z", unique_key="k"))
        assert fourth not in (first, second)


def test_a_key_too_long_or_empty_is_refused_and_nothing_is_enqueued() -> None:
    with Runtime() as rt:
        node = _serving(rt)
        for key, said in (("k" * 256, "the limit is 255"), ("", "uniqueKey is empty")):
            with pytest.raises(pinlater.PinLaterException) as raised:
                node.enqueue("mail", job(b"ok"), job(b"bad", unique_key=key))
            assert raised.value.errorCode == pinlater.ErrorCode.ENQUEUE_REJECTED
            assert said in raised.value.message
        rt.settle()
        assert node.count("mail") == 0
