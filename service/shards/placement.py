"""Where a new partition's projection goes (decision 0031): the writable shard of the
shard map holding the fewest partitions, counted from the catalog projection's
placements, ties to the shard listed first. Fewest rather than least loaded: a count is
a ledger fact that every server reads the same, while load is a measurement that moves.

The writer asks before it creates or grows a queue, and appends one `PartitionPlaced`
per new partition in the same catalog record as the creation or resize. A map of one
shard places nothing: a deployment on one store writes no placement records, and a
partition without one is on the home shard (the map's first).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from pinledger.projections.store import QueueRow
from pinledger.service.shards.shard_map import ShardMap, ShardMapError


def placements(rows: Iterable[QueueRow], home: str) -> dict[tuple[str, int], str]:
    """The shard of every partition of every queue (queue, partition), a partition never
    placed being on `home`."""
    return {(r.name, p): r.shard_of(p) or home for r in rows for p in range(r.partitions)}


def place(
    shard_map: ShardMap, rows: Sequence[QueueRow], queue: str, partitions: int, new: bool
) -> dict[int, str]:
    """The shard of each partition of `queue` below `partitions` to place now: all of
    them for a queue being created (`new`), those past its current count for a resize
    (none when the queue is not in `rows`: a resize of a queue not projected yet places
    nothing, its partitions stay on the home shard)."""
    if len(shard_map.shards) < 2:
        return {}
    home = shard_map.shards[0].name
    row = next((r for r in rows if r.name == queue), None)
    # A queue created again: its old partitions are not counted.
    counts = Counter(
        shard for (q, _), shard in placements(rows, home).items() if not (new and q == queue)
    )
    if new:
        first = 0
    elif row is None:
        return {}
    else:
        first = row.partitions
    order = {s.name: i for i, s in enumerate(shard_map.shards)}
    writable = shard_map.writable
    if not writable:  # parse_shard_map refuses such a map; a caller's map may not be parsed
        raise ShardMapError("every shard is dequeueOnly: new partitions have nowhere to go")
    placed = {}
    for p in range(first, partitions):
        best = min(writable, key=lambda s: (counts[s.name], order[s.name]))
        placed[p] = best.name
        counts[best.name] += 1
    return placed


class Placer:
    """`place` on the current shard map and the catalog projection's queues: what the
    writer calls (LedgerWriter.placer)."""

    def __init__(
        self, shard_map: Callable[[], ShardMap], queues: Callable[[], Sequence[QueueRow]]
    ) -> None:
        self._shard_map = shard_map
        self._queues = queues

    def __call__(self, queue: str, partitions: int, new: bool) -> dict[int, str]:
        shard_map = self._shard_map()
        if len(shard_map.shards) < 2:
            return {}  # no read of the store for a deployment on one
        return place(shard_map, self._queues(), queue, partitions, new)
