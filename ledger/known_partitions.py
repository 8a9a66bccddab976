"""A partition added since a producer last read the cluster's metadata (a queue grown
live, decision 0030): the producer refuses an append to it as to a partition that does
not exist (librdkafka: `_UNKNOWN_PARTITION`; kafka-python: "Unrecognized partition") for
up to `metadata.max.age.ms`, 5 minutes. Both Kafka adapters, refused so, make their
producer read the topic's metadata again and append once more. Nothing happens on the
path of an append that is not refused."""

from __future__ import annotations

import time
from collections.abc import Callable

# How long to wait for the producer's metadata to list a new partition: the partitions
# were added, and waited for, before any record names one.
REFRESH_WAIT_S = 5.0
_PAUSE_S = 0.05


def learn_partition(
    topic: str,
    partition: int,
    count: Callable[[str], int],
    refresh: Callable[[str], object],
    wait_s: float = REFRESH_WAIT_S,
) -> bool:
    """After the producer refused `partition` of `topic`: ask again (`refresh`) until
    its metadata lists the partition (`count`: the partitions it knows), for up to
    `wait_s`; whether it does. A topic it finds no partition of (deleted, or no broker
    answers) is not waited for: the append's own error says what happened."""
    deadline = time.monotonic() + min(wait_s, REFRESH_WAIT_S)
    while True:
        refresh(topic)
        known = count(topic)
        if known > partition:
            return True
        if known == 0 or time.monotonic() >= deadline:
            return False
        time.sleep(_PAUSE_S)
