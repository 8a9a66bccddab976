"""A producer that refused a partition it has not seen asks the cluster again until it
lists it (a queue grown live), for a bounded time, and not at all for a topic it finds
no partition of (the append's own error says what happened)."""

from __future__ import annotations

import time

from pinledger.ledger.known_partitions import learn_partition


class Producer:
    def __init__(self, known: int, appear_after: int = 0, grown_to: int = 0) -> None:
        self.known = known
        self.appear_after = appear_after
        self.grown_to = grown_to
        self.refreshes = 0

    def count(self, topic: str) -> int:
        return self.known

    def refresh(self, topic: str) -> None:
        self.refreshes += 1
        if self.grown_to and self.refreshes > self.appear_after:
            self.known = self.grown_to


def test_a_grown_topic_is_learned_on_the_first_refresh() -> None:
    producer = Producer(known=2, grown_to=6)
    assert learn_partition("q", 5, producer.count, producer.refresh)
    assert producer.refreshes == 1


def test_metadata_that_lags_is_asked_again_until_it_lists_the_partition() -> None:
    producer = Producer(known=2, appear_after=3, grown_to=6)
    assert learn_partition("q", 5, producer.count, producer.refresh)
    assert producer.refreshes == 4


def test_a_partition_that_never_appears_is_given_up_within_the_wait() -> None:
    producer = Producer(known=2)
    started = time.monotonic()
    assert not learn_partition("q", 7, producer.count, producer.refresh, wait_s=0.2)
    assert time.monotonic() - started < 2


def test_a_topic_without_partitions_is_not_waited_for() -> None:
    producer = Producer(known=0)
    assert not learn_partition("gone", 0, producer.count, producer.refresh)
    assert producer.refreshes == 1
