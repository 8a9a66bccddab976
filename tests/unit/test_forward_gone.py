"""A forwarded dequeue to a frozen peer is not waited out once the owners' group has
lost the peer (service/api/peers.py): the call answers what it has, and the worker's
next poll reaches the partitions' new owner. A peer still in the group is waited for
up to the forward timeout, as before, and an answer already on its way is taken.

Real sockets: a frozen peer is a listening socket whose connections the kernel accepts
and nobody reads; an answering peer is a thriftpy2 server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.rpc import make_server
from thriftpy2.transport import TCyFramedTransportFactory

from pinledger.idl import pinlater
from pinledger.service.api import dequeue, requests
from pinledger.service.api.forwarding import CountingPeerPool
from pinledger.service.api.peers import PeerGoneError, PeerPool
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics
from pinledger.service.testing.servers import wait_listening


@pytest.fixture
def frozen() -> Iterator[str]:
    """The address of a server that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


class _Handler:
    def __init__(self, delay_s: float, descriptor: str) -> None:
        self.delay_s = delay_s
        self.descriptor = descriptor

    def dequeueOwned(self, context: Any, request: Any) -> Any:  # noqa: N802 - the IDL's name
        time.sleep(self.delay_s)
        return pinlater.PinLaterDequeueResponse(jobs={self.descriptor: b"body"}, jobMetadata={})


def _answering(delay_s: float, descriptor: str = "q:s1:p2:7") -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = make_server(
        pinlater.PinLater,
        _Handler(delay_s, descriptor),
        "127.0.0.1",
        port,
        proto_factory=TCyBinaryProtocolFactory(),  # type: ignore[no-untyped-call]
        trans_factory=TCyFramedTransportFactory(),
    )
    threading.Thread(target=server.serve, daemon=True).start()
    wait_listening(port, timeout_s=5)
    yield f"127.0.0.1:{port}"
    server.close()


@pytest.fixture
def slow_peer() -> Iterator[str]:
    """A peer that answers each forward after 0.5 s."""
    yield from _answering(0.5)


@pytest.fixture
def quick_peer() -> Iterator[str]:
    yield from _answering(0.0, "q:s2:p3:9")


def _request(limit: int = 5) -> requests.DequeueRequest:
    return requests.parse_dequeue(pinlater.PinLaterDequeueRequest(queueName="q", limit=limit))


class _Asked:
    """A `gone` that counts how often it was asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.answer


def test_a_frozen_peer_that_left_the_group_is_given_up_after_the_abandon_time(
    frozen: str,
) -> None:
    pool = PeerPool(timeout_ms=10_000, abandon_after_s=0.3)
    started = time.monotonic()
    with pytest.raises(PeerGoneError, match="no longer in the owners' group"):
        pool.dequeue(frozen, None, _request(), 5, gone=_Asked(True))
    assert 0.3 <= time.monotonic() - started < 2.0
    assert frozen not in pool._idle or not pool._idle[frozen]  # its connection was closed


def test_a_frozen_peer_still_in_the_group_is_waited_for_up_to_the_timeout(frozen: str) -> None:
    pool = PeerPool(timeout_ms=700, abandon_after_s=0.2)
    gone = _Asked(False)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not answer a forwarded dequeue"):
        pool.dequeue(frozen, None, _request(), 5, gone=gone)
    assert time.monotonic() - started >= 0.65
    assert gone.asked >= 3  # asked between slices once the abandon time had passed


def test_an_answer_on_its_way_is_taken_from_a_peer_that_left(slow_peer: str) -> None:
    """A server stopping answers its calls as it leaves the group: an answer within the
    abandon time is taken, and `gone` is not even asked before that time."""
    pool = PeerPool(timeout_ms=10_000, abandon_after_s=2.0)
    gone = _Asked(True)
    response = pool.dequeue(slow_peer, None, _request(), 5, gone=gone)
    assert list(response.jobs) == ["q:s1:p2:7"]
    assert gone.asked == 0
    assert len(pool._idle[slow_peer]) == 1  # the connection went back to the pool
    pool.close()


class _Owner:
    def __init__(self, peers: list[str], members: set[str]) -> None:
        self.peers = peers
        self.members = members

    def peers_for(self, queue: str) -> list[str]:
        return list(self.peers)

    def is_peer(self, address: str) -> bool:
        return address in self.members


def test_a_dequeue_answers_what_it_has_once_a_frozen_peer_left_the_group(
    frozen: str, quick_peer: str
) -> None:
    """The call tops up from the peer that answers and gives up on the frozen one once
    the group no longer lists it; the forward counts as failed."""
    metrics = Metrics()
    pool = CountingPeerPool(metrics, quiet_s=0, timeout_ms=10_000)
    pool.abandon_after_s = 0.3
    owner = _Owner([frozen, quick_peer], members={quick_peer})
    own = pinlater.PinLaterDequeueResponse(jobs={"q:s0:p1:1": b"a"}, jobMetadata={})
    started = time.monotonic()
    merged = dequeue.forward(owner, pool, own, None, _request())
    assert time.monotonic() - started < 2.0
    assert set(merged.jobs) == {"q:s0:p1:1", "q:s2:p3:9"}
    assert metrics.snapshot_counter(catalogue.FORWARDED_DEQUEUES_TOTAL, outcome="failed") == 1
    assert metrics.snapshot_counter(catalogue.FORWARDED_DEQUEUES_TOTAL, outcome="jobs") == 1
    pool.close()
