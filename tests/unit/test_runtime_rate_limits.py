"""Rate limits on the fakes (the queue config's maxJobsPerSecond): each job is charged
once, by the server that claims it, against its share of the queue's rate (the
fraction of the queue's partitions it owns). So dequeueOwned, the peers' method, which
any client can call, gets no more than dequeueJobs does: nothing from a paused queue;
and a dequeue topped up from a peer is not charged twice."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pinledger.idl import pinlater
from pinledger.service.queue_config import QueueConfig, parse_queue_config
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

PARTITIONS = 4
CONFIG = dataclasses.replace(TEST_CONFIG, partitions=PARTITIONS)
EVERYTHING = [("mail", p) for p in range(PARTITIONS)]


def _limited(rate: float) -> QueueConfig:
    entry = {"name": "mail", "queueConfig": {"maxJobsPerSecond": rate}}
    return parse_queue_config(json.dumps({"queues": [entry]}))


def _two_owners(rt: Runtime, rate: float | None) -> tuple[Node, Node]:
    """Two servers sharing `mail` (two partitions each), limited to `rate` jobs/s (None:
    unlimited), each knowing its share and the other's partitions."""
    a, b = rt.node(), rt.node()
    a.create_queue("mail")
    for node in (a, b):
        node.queue_config = QueueConfig() if rate is None else _limited(rate)
    rt.advance_until(
        lambda: (
            len(a.serving()) == len(b.serving()) == 2
            and sorted(a.serving() + b.serving()) == EVERYTHING
        ),
        "the two servers to share the partitions",
    )
    rt.advance_until(
        lambda: (
            a.owner.rate_shares == {"mail": 0.5} == b.owner.rate_shares
            and bool(a.owner.peers_for("mail"))
            and bool(b.owner.peers_for("mail"))
        ),
        "each server to know its share and the other's partitions",
    )
    return a, b


def _refused(call: object) -> bool:
    assert callable(call)
    with pytest.raises(pinlater.PinLaterException) as raised:
        call()
    return bool(raised.value.errorCode == pinlater.ErrorCode.DEQUEUE_RATE_LIMITED)


def test_a_paused_queue_gives_nothing_through_dequeue_owned() -> None:
    with Runtime(CONFIG) as rt:
        a, b = _two_owners(rt, rate=10)
        jobs = [d for i in range(8) for d in a.enqueue("mail", job(b"%d" % i))]
        rt.settle()
        for node in (a, b):
            node.queue_config = _limited(0)

        assert _refused(lambda: a.dequeue("mail", 8))
        assert a.dequeue_owned("mail", 8) == {}
        assert b.dequeue_owned("mail", 8) == {}

        for node in (a, b):  # resumed: the owners hand their jobs out again
            node.queue_config = QueueConfig()
        assert set(a.dequeue_owned("mail", 8)) | set(b.dequeue_owned("mail", 8)) == set(jobs)


def test_dequeue_owned_is_held_to_the_owners_share_of_the_rate() -> None:
    with Runtime(CONFIG) as rt:
        a, _ = _two_owners(rt, rate=4)  # 2 jobs/s for each owner
        for i in range(20):
            a.enqueue("mail", job(b"%d" % i))
        rt.settle()
        # A batch is never cut short (Guava's semantics): the first puts the owner in
        # debt, which the next ones wait out.
        assert len(a.dequeue_owned("mail", 6)) == 6
        assert a.dequeue_owned("mail", 6) == {}
        rt.clock.advance(1.5)  # 3 permits: still 1 short
        assert a.dequeue_owned("mail", 6) == {}
        rt.clock.advance(1.0)
        assert len(a.dequeue_owned("mail", 1)) == 1


def test_a_dequeue_topped_up_from_a_peer_is_charged_once() -> None:
    with Runtime(CONFIG) as rt:
        a, b = _two_owners(rt, rate=None)
        for i in range(4 * PARTITIONS):
            a.enqueue("mail", job(b"%d" % i))
        rt.settle()
        assert len(a.dequeue_owned("mail", 100)) == 8  # a's partitions are empty now
        for node in (a, b):
            node.queue_config = _limited(4)  # 2 jobs/s for each owner

        # `a` has none: the peer claims them, and charges them.
        assert len(a.dequeue("mail", 2)) == 2
        assert b.dequeue_owned("mail", 2) == {}  # b's share is spent
        # `a`'s share is untouched: its own jobs are handed out in the same second.
        for i in range(PARTITIONS):
            a.enqueue("mail", job(b"late %d" % i))  # one in each partition
        rt.settle()
        assert len(a.dequeue("mail", 2)) == 2
        assert _refused(lambda: a.dequeue("mail", 2))
