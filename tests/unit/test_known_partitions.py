"""A producer asked about a partition it has not seen refreshes its metadata first: once
per growth of a topic, never for partitions it knows, and not at all for a topic that
does not exist (the append reports that as before)."""

from __future__ import annotations

import pytest

from pinledger.ledger import known_partitions
from pinledger.ledger.known_partitions import KnownPartitions
from pinledger.ledger.log import Append


class Producer:
    def __init__(self, counts: dict[str, int], after_refresh: dict[str, int]) -> None:
        self.counts = counts
        self.after_refresh = after_refresh
        self.asked: list[str] = []
        self.refreshed: list[str] = []

    def count(self, topic: str) -> int:
        self.asked.append(topic)
        return self.counts.get(topic, 0)

    def refresh(self, topic: str) -> None:
        self.refreshed.append(topic)
        self.counts[topic] = self.after_refresh.get(topic, self.counts.get(topic, 0))


def test_known_partitions_are_not_asked_about_again() -> None:
    producer = Producer({"q": 4}, {})
    known = KnownPartitions(producer.count, producer.refresh)
    known.ensure([Append("q", 0, b""), Append("q", 3, b"")])
    known.ensure([Append("q", 2, b"")] * 10)
    assert producer.asked == ["q"] and producer.refreshed == []


def test_a_grown_topic_is_refreshed_once() -> None:
    producer = Producer({"q": 2}, {"q": 6})
    known = KnownPartitions(producer.count, producer.refresh)
    known.ensure([Append("q", 1, b"")])
    known.ensure([Append("q", 5, b"")])
    known.ensure([Append("q", 4, b"")])
    assert producer.refreshed == ["q"]


def test_a_topic_that_does_not_exist_is_left_to_the_produce() -> None:
    producer = Producer({}, {})
    known = KnownPartitions(producer.count, producer.refresh)
    known.ensure([Append("gone", 0, b"")])
    assert producer.refreshed == []


def test_a_partition_that_never_appears_gives_up_after_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(known_partitions, "REFRESH_WAIT_S", 0.2)
    producer = Producer({"q": 2}, {"q": 2})
    known = KnownPartitions(producer.count, producer.refresh)
    known.ensure([Append("q", 7, b"")])  # returns: the produce says it does not exist
    assert producer.refreshed
