"""How far this server's projection is behind the log, in records and in seconds.

Measured where the owner already reads the log's end: the watchdog's lag check on the
members thread (every 2 s, one end-offsets request for every owned partition), so it
costs no request of its own. Per owned partition (a paused one from the record it is
paused at; the catalog topic too, when this server owns it):

- `pinledger_projection_lag_records{topic,partition}`: end offset - projected offset;
- `pinledger_projection_lag_seconds{queue}`: how long the oldest unprojected record of
  the queue's partitions owned here has been in the log, the worst partition's. A
  record carries no time this server could trust (another server's clock wrote its
  envelope), so its age is read off this server's own monotonic clock: the first end
  offset read past a record says it was in the log then. Each partition keeps the
  (time, end offset) reads that are still past its projected offset, oldest first: the
  first of them is when its oldest unprojected record was first seen, so the age is at
  least `now - that time`, and at most one read interval more. Caught up: 0.

Series of partitions and queues no longer owned go at the next check. The reads kept
per partition are bounded (MAX_READS, thinned to every other one when full: a coarser
bound, still a lower one).

State: the members thread's alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from pinledger.ledger.log import PartitionKey, queue_of_topic
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics

MAX_READS = 32

# (monotonic time, end offset) of a read of the log's end.
Read = tuple[float, int]


def _thinned(reads: list[Read]) -> list[Read]:
    """Every other read, the first and the last kept: a bound from a read dropped is
    replaced by one from a later read (a smaller age: still a lower bound)."""
    if len(reads) <= MAX_READS:
        return reads
    kept = reads[::2]
    return kept if kept[-1] is reads[-1] else [*kept, reads[-1]]


class ProjectionLag:
    def __init__(self, metrics: Metrics, prefix: str) -> None:
        self.metrics = metrics
        self.prefix = prefix
        # Per partition, the reads of its end past its projected offset, oldest first.
        self._reads: dict[PartitionKey, list[Read]] = {}

    def update(
        self, projected: Mapping[PartitionKey, int], ends: Mapping[PartitionKey, int], now: float
    ) -> None:
        """One check: each partition's next offset to project (`projected`) against the
        log's end read at monotonic time `now`. A partition missing from `ends` (its
        topic deleted) has no series."""
        records: list[tuple[Mapping[str, str], float]] = []
        ages: dict[str, float] = {}
        kept: dict[PartitionKey, list[Read]] = {}
        for key, offset in sorted(projected.items()):
            end = ends.get(key)
            if end is None:
                continue
            behind = max(0, end - offset)
            records.append(({"topic": key[0], "partition": str(key[1])}, float(behind)))
            age = 0.0
            if behind:
                reads = [r for r in self._reads.get(key, ()) if r[1] > offset]
                if not reads or reads[-1][1] < end:
                    reads.append((now, end))
                kept[key] = reads = _thinned(reads)
                age = max(0.0, now - reads[0][0])
            queue = queue_of_topic(self.prefix, key[0])
            if queue is not None:
                ages[queue] = max(ages.get(queue, 0.0), age)
        self._reads = kept
        self.metrics.replace_gauges(catalogue.PROJECTION_LAG_RECORDS, records)
        self.metrics.replace_gauges(
            catalogue.PROJECTION_LAG_SECONDS,
            [({"queue": queue}, age) for queue, age in sorted(ages.items())],
        )
