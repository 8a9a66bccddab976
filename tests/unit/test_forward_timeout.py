"""A forwarded dequeue is waited for longer than the peer's longest claim append
(Config.forward_timeout_s, derived from APPEND_TIMEOUT_S): a forward that gave up while
the peer's claim was still on its way would leave the claimed jobs with no worker, and a
one-attempt job would fail at its claim timeout without having run."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Claimed, Envelope
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.group_commit import GroupCommit, Part, longest_append_s
from pinledger.ledger.log import Append
from pinledger.ledger.rdkafka import config as rdkafka_config
from pinledger.service.api.forwarding import CountingPeerPool
from pinledger.service.api.peers import PeerPool
from pinledger.service.assembly import kafka_settings
from pinledger.service.config import Config
from pinledger.service.observability.metrics import Metrics


@pytest.mark.parametrize("append_timeout_s", [0.5, 5.0, 15.0, 60.0])
def test_a_forward_is_waited_for_longer_than_the_peers_longest_claim_append(
    append_timeout_s: float,
) -> None:
    config = Config(append_timeout_s=append_timeout_s)
    settings = kafka_settings(config)
    # What the log adapters wait for one append at most (kafka-python waits
    # append_timeout_ms; librdkafka fails a record not acknowledged by message.timeout.ms).
    adapter_ms = max(
        settings.append_timeout_ms, rdkafka_config.producer(settings)["message.timeout.ms"]
    )
    longest_claim_ms = longest_append_s(adapter_ms / 1000) * 1000
    assert CountingPeerPool.of(config, Metrics()).timeout_ms > longest_claim_ms
    assert config.forward_timeout_s * 1000 > longest_claim_ms


def test_a_peer_pool_without_a_timeout_outlasts_the_default_claim_append() -> None:
    assert PeerPool().timeout_ms > Config().claim_append_s * 1000


class _HeldLog(FakeLog):
    """Each append waits until the test lets it end, so callers pile up behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[threading.Event] = [threading.Event() for _ in range(3)]
        self.release: list[threading.Event] = [threading.Event() for _ in range(3)]
        self.sources: list[list[str]] = []
        self._lock = threading.Lock()

    def append(self, appends: Sequence[Append]) -> list[int]:
        with self._lock:
            n = len(self.sources)
            self.sources.append(
                [
                    part.envelope.actor.source
                    for a in appends
                    for part in codec.decode_parts(a.value, a.headers)
                ]
            )
        self.started[n].set()
        assert self.release[n].wait(10)
        return super().append(appends)


def _claim(source: str) -> Part:
    envelope = Envelope(at=1, actor=Actor(source=source), events=(Claimed(local_id=1, claim="c"),))
    value = codec.encode(envelope)
    return Part("t", 0, value, codec.encode_part(envelope, None, value), None, 1)


def test_a_claim_waits_for_one_append_in_flight_then_goes_in_the_next() -> None:
    """The bound longest_append_s rests on: with the appends in flight to its partition
    at their limit, a caller's claim goes out in the append that follows the first of
    them to end: two appends' time at most."""
    log = _HeldLog()
    log.create_topic("t", 1)
    group = GroupCommit(log)
    callers = []
    for n, source in enumerate(["first", "second", "third"]):
        caller = threading.Thread(target=group.append, args=([_claim(source)],), daemon=True)
        caller.start()
        callers.append(caller)
        if n < 2:
            assert log.started[n].wait(5)  # the first two are in flight at once
    log.release[0].set()
    assert log.started[2].wait(5)
    assert log.sources[2] == ["third"]
    for release in log.release:
        release.set()
    for caller in callers:
        caller.join(5)
    assert longest_append_s(15.0) == 30.0
