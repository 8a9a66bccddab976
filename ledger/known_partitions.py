"""How many partitions each topic has, as a producer knows it: an append to a partition
added since the producer last looked (a queue grown live, decision 0030) first makes
the producer refresh its metadata, instead of failing as a partition that does not
exist. Both Kafka adapters keep one; the refresh is each client's own."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pinledger.ledger.log import Append

# How long a refresh may wait for the producer's metadata to list a new partition: the
# partitions were added (and waited for) before any record names one.
REFRESH_WAIT_S = 5.0
_PAUSE_S = 0.05


class KnownPartitions:
    def __init__(self, count: Callable[[str], int], refresh: Callable[[str], object]) -> None:
        """`count(topic)`: the partitions the producer knows of now (it may ask the
        cluster for a topic it never saw); `refresh(topic)`: make it ask again."""
        self._count = count
        self._refresh = refresh
        # Counts only grow (Kafka never removes a partition): a stale one is only low.
        self._counts: dict[str, int] = {}

    def ensure(self, appends: Sequence[Append]) -> None:
        """Before producing: have the producer know every partition these name."""
        counts = self._counts
        for a in appends:
            if a.partition >= counts.get(a.topic, 0):
                counts[a.topic] = self._learn(a.topic, a.partition)

    def _learn(self, topic: str, partition: int) -> int:
        known = self._count(topic)
        deadline = time.monotonic() + REFRESH_WAIT_S
        # 0: no such topic (a queue deleted a moment ago), which the produce reports as
        # it always did; only a topic known with too few partitions is asked again.
        while 0 < known <= partition and time.monotonic() < deadline:
            self._refresh(topic)
            time.sleep(_PAUSE_S)
            known = self._count(topic)
        return known  # still short: the produce says the partition does not exist
