"""Where new partitions go (decision 0031): the writable shard holding the fewest
partitions, ties to the first listed; a map of one shard places nothing; a resize places
only the partitions it adds; and the writer puts the placements in the creation's or
resize's own catalog record, only from the ledger format that has them."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger import codec, formats
from pinledger.ledger.events import Actor, Event, PartitionPlaced, QueueCreated, QueueResized
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import QueueRow
from pinledger.service.shards.placement import Placer, place
from pinledger.service.shards.shard_map import Shard, ShardMap, single

DSN = "postgresql://app@db/ledger"
A, B, C = Shard("a", DSN), Shard("b", DSN), Shard("c", DSN)
T0 = 1_700_000_000_000
OPS = Actor("ops", "r1", "s1")


def test_a_new_queue_spreads_over_the_shards_in_map_order() -> None:
    assert place(ShardMap((A, B, C)), [], "mail", 5, new=True) == {
        0: "a",
        1: "b",
        2: "c",
        3: "a",
        4: "b",
    }


def test_the_fewest_partitions_win_and_unplaced_partitions_count_for_the_home_shard() -> None:
    # An old queue of 3 partitions, never placed: all three on the home shard "a".
    rows = [QueueRow("old", 3, T0), QueueRow("two", 2, T0, shards=("b", "c"))]
    assert place(ShardMap((A, B, C)), rows, "mail", 3, new=True) == {0: "b", 1: "c", 2: "b"}


def test_dequeue_only_shards_take_no_partition() -> None:
    drained = ShardMap((A, Shard("b", DSN, dequeue_only=True), C))
    assert set(place(drained, [], "mail", 4, new=True).values()) == {"a", "c"}


def test_a_resize_places_only_the_partitions_it_adds() -> None:
    rows = [QueueRow("mail", 2, T0, shards=("a", "b"))]
    assert place(ShardMap((A, B)), rows, "mail", 4, new=False) == {2: "a", 3: "b"}
    assert place(ShardMap((A, B)), rows, "mail", 2, new=False) == {}
    assert place(ShardMap((A, B)), rows, "mail", 1, new=False) == {}
    # Not projected yet: nothing placed, rather than placing partitions that may be
    # holding jobs on the home shard already.
    assert place(ShardMap((A, B)), [], "mail", 4, new=False) == {}


def test_a_queue_created_again_does_not_count_its_old_partitions() -> None:
    rows = [QueueRow("mail", 4, T0, shards=("a", "a", "a", "a"))]
    assert place(ShardMap((A, B)), rows, "mail", 2, new=True) == {0: "a", 1: "b"}


def test_one_shard_places_nothing_and_reads_no_store() -> None:
    def queues() -> list[QueueRow]:
        raise AssertionError("a map of one shard must not read the store")

    assert Placer(lambda: single(DSN), queues)("mail", 8, True) == {}
    assert Placer(lambda: ShardMap((A, B)), list)("mail", 2, True) == {0: "a", 1: "b"}


@given(
    counts=st.lists(st.integers(0, 6), min_size=2, max_size=4),
    dequeue_only=st.lists(st.booleans(), min_size=4, max_size=4),
    partitions=st.integers(1, 12),
)
def test_each_partition_goes_to_a_writable_shard_holding_the_fewest(
    counts: list[int], dequeue_only: list[bool], partitions: int
) -> None:
    shards = tuple(
        Shard(f"s{i}", DSN, dequeue_only=dequeue_only[i] and i > 0) for i in range(len(counts))
    )
    rows = [QueueRow(f"q{i}", n, T0, shards=(f"s{i}",) * n) for i, n in enumerate(counts) if n]
    placed = place(ShardMap(shards), rows, "new", partitions, new=True)
    assert sorted(placed) == list(range(partitions))
    writable = [s.name for s in shards if not s.dequeue_only]
    held = Counter({s.name: counts[i] for i, s in enumerate(shards)})
    spread = max(held[n] for n in writable) - min(held[n] for n in writable)
    for p in range(partitions):
        assert placed[p] in writable
        assert held[placed[p]] == min(held[n] for n in writable)
        held[placed[p]] += 1
    # Placing never widens the gap between writable shards past what it was (or one).
    assert max(held[n] for n in writable) - min(held[n] for n in writable) <= max(spread, 1)


def _catalog(log: FakeLog) -> list[tuple[Event, ...]]:
    records = log.records(catalog_topic("t."), 0)
    return [codec.decode(r.value).events for r in records]


def test_the_writer_places_in_the_creation_and_resize_records_from_format_2() -> None:
    log = FakeLog()
    writer = LedgerWriter(log, "t.")
    projected = [QueueRow("mail", 2, T0, shards=("a", "b"))]
    writer.placer = Placer(lambda: ShardMap((A, B)), lambda: projected)
    writer.follow_format(formats.PLAIN)
    writer.create_queue("old", 2, T0, OPS)
    writer.follow_format(formats.PLACEMENTS)
    writer.create_queue("mail", 2, T0, OPS)
    writer.resize_queue("mail", 3, T0, OPS, "grown")
    events = _catalog(log)
    assert events[-3] == (QueueCreated("old", 2),), "format 1: no placement records"
    assert events[-2] == (
        QueueCreated("mail", 2),
        PartitionPlaced("mail", 0, "a", "queue created"),
        PartitionPlaced("mail", 1, "b", "queue created"),
    )
    assert events[-1] == (
        QueueResized("mail", 3, "grown"),
        PartitionPlaced("mail", 2, "a", "queue resized"),
    )
