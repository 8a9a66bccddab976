"""The ShardedStore (projections/sharded_store.py, decision 0031) on in-memory FakeStores:
per-partition calls reach the placed shard only, fan-out reads merge to what one store
holding every job answers (scans page by page, continuation keys included), and the
placement cache misses, refreshes and refuses as the decision says."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.ledger.events import PartitionMoved, PartitionPlaced
from pinledger.ledger.log import catalog_topic, queue_topic
from pinledger.ledger.state import Job, JobState
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.sharded_store import ShardedStore, ShardMissingError
from pinledger.projections.store import (
    EventRow,
    ImportedJob,
    JobFilter,
    JobRow,
    JobSearch,
    LedgerStore,
    PartitionBatch,
    PartitionGoneError,
    PlacementUnknownError,
    QueueRow,
    ScanKey,
    StoreError,
    StoreUnavailableError,
)

PREFIX = "shards."
CATALOG = catalog_topic(PREFIX)
T0 = 1_700_000_000_000
PENDING, IN_PROGRESS, SUCCEEDED, FAILED = (
    JobState.PENDING,
    JobState.IN_PROGRESS,
    JobState.SUCCEEDED,
    JobState.FAILED,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CountingStore(FakeStore):
    """A FakeStore that counts the calls the routing is about."""

    def __init__(self, schema: str) -> None:
        super().__init__(schema)
        self.calls: Counter[str] = Counter()
        # What `hide` was told, call by call.
        self.told: list[dict[str, list[int]]] = []
        # The queue rows `queues()` answers instead of the catalog's (None: the catalog's):
        # a placement changed by a move, without the move's records.
        self.rows: list[QueueRow] | None = None

    def queues(self) -> list[QueueRow]:
        self.calls["queues"] += 1
        return super().queues() if self.rows is None else list(self.rows)

    def hide(self, away: Mapping[str, Sequence[int]]) -> None:
        self.told.append({queue: list(ps) for queue, ps in away.items()})
        super().hide(away)

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        self.calls["lookup"] += 1
        return super().lookup(queue, keys, include_body)

    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls["offsets"] += 1
        return super().offsets(partitions)

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        self.calls["count"] += 1
        return super().count(where, now, future)


def _shards(*names: str) -> dict[str, CountingStore]:
    return {name: CountingStore(name) for name in names}


def _catalog(stores: Iterable[FakeStore], *rows: QueueRow) -> None:
    """The queues created in each store's catalog projection, as each shard's own
    CatalogProjector would."""
    for store in stores:
        at = store.start_offset(CATALOG, 0)
        created = [(row, [queue_topic(PREFIX, row.name)]) for row in rows]
        store.commit_catalog(CATALOG, at, at + 1, created, [])


def _job(local_id: int, run_after: int = T0, priority: int = 1, **changes: object) -> Job:
    job = Job(local_id, priority, PENDING, f"body-{local_id}".encode(), 2, 2, "", T0, run_after, T0)
    return job._replace(**changes)  # type: ignore[arg-type]


def _enqueued(job: Job, offset: int) -> EventRow:
    """The applied enqueue of `job` in the timeline, at its run_after."""
    return EventRow(
        job.local_id, offset, 0, "enq", job.run_after, "", "", "", None, True, "applied",
        state_after=None, attempts_remaining_after=None, detail={}, traceparent=None,
    )  # fmt: skip


def _commit(store: LedgerStore, queue: str, partition: int, *jobs: Job) -> None:
    """One batch of `jobs` into the partition, each with an applied enqueue event (at its
    run_after) and an imported descriptor."""
    topic = queue_topic(PREFIX, queue)
    at = store.offset(topic, partition)
    events = [_enqueued(job, at) for job in jobs]
    imported = {
        job.local_id: ImportedJob(f"old-{queue}-{partition}-{job.local_id}", job.priority)
        for job in jobs
    }
    batch = PartitionBatch(
        queue, topic, partition, at, at + 1, upserts=list(jobs), events=events, imported=imported
    )
    store.commit_partition_batch(batch)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _sharded(stores: Mapping[str, LedgerStore], clock: Clock) -> ShardedStore:
    return ShardedStore(PREFIX, stores, refresh_s=2.0, clock=clock)


# -- routing --------------------------------------------------------------------------


def test_each_partition_is_written_to_and_read_from_its_shard_only(clock: Clock) -> None:
    shards = _shards("a", "b", "c")
    # p0 on b, p1 not placed (home: a), p2 on c, p3 on b.
    _catalog(shards.values(), QueueRow("mail", 4, T0, shards=("b", "", "c", "b")))
    store = _sharded(shards, clock)
    assert [store.shard_name("mail", p) for p in range(4)] == ["b", "a", "c", "b"]
    for p in range(4):
        _commit(store, "mail", p, _job(10 + p))

    topic = queue_topic(PREFIX, "mail")
    held = {
        name: [p for p in range(4) if s.partition_jobs("mail", p)] for name, s in shards.items()
    }
    assert held == {"a": [1], "b": [0, 3], "c": [2]}
    for p in range(4):
        home = store.shard_name("mail", p)
        assert store.offset(topic, p) == 1
        for name, shard in shards.items():
            # Every shard has the partition's offset row (from its catalog), only the
            # placed one moved it.
            assert shard.offsets([(topic, p)]) == {(topic, p): 1 if name == home else 0}
        assert list(store.load_jobs("mail", p, [10 + p])) == [10 + p]
        assert [e.type for e in store.job_events("mail", p, 10 + p)] == ["enq"]
        assert len(store.timeline("mail", p, 10 + p)) == 1
        assert [h.job.local_id for h in store.stream_jobs("mail", p, None, None)] == [10 + p]
        assert len(list(store.event_lines("mail", p, 0))) == 1
        assert list(store.partition_jobs("mail", p)) == [10 + p]
        assert [h.job.local_id for h in store.ready_jobs("mail", p, 1, (-(2**63), 0), 5)] == [
            10 + p
        ]


def test_offsets_are_read_once_per_shard_and_merged(clock: Clock) -> None:
    shards = _shards("a", "b")
    _catalog(shards.values(), QueueRow("mail", 3, T0, shards=("b", "", "b")))
    store = _sharded(shards, clock)
    topic = queue_topic(PREFIX, "mail")
    _commit(store, "mail", 2, _job(1))
    keys = [(topic, 0), (topic, 1), (topic, 2), (CATALOG, 0), (topic, 7), ("other", 0)]
    # Partition 7 is not placed, another prefix's topic was never seen: left out.
    assert store.offsets(keys) == {(topic, 0): 0, (topic, 1): 0, (topic, 2): 1, (CATALOG, 0): 1}
    assert (shards["a"].calls["offsets"], shards["b"].calls["offsets"]) == (1, 1)
    # The catalog's offset is home's.
    assert store.start_offset(CATALOG, 0) == 1


def test_a_lookup_asks_each_shard_once_for_its_keys(clock: Clock) -> None:
    shards = _shards("a", "b", "c")
    _catalog(shards.values(), QueueRow("mail", 3, T0, shards=("b", "c", "c")))
    store = _sharded(shards, clock)
    for p in range(3):
        _commit(store, "mail", p, _job(1), _job(2))
    keys = [(0, 1), (1, 2), (2, 1), (2, 9), (1, 1), (5, 1)]  # (2, 9) missing, p5 unknown
    found = store.lookup("mail", keys, include_body=True)
    assert sorted((row.partition, row.job.local_id) for row in found) == [
        (0, 1),
        (1, 1),
        (1, 2),
        (2, 1),
    ]
    assert {row.job.body for row in found} == {b"body-1", b"body-2"}
    # p5, not placed, is asked of home, which holds nothing of it.
    assert [shards[n].calls["lookup"] for n in "abc"] == [1, 1, 1]


def test_counts_ask_only_the_shards_holding_the_queue(clock: Clock) -> None:
    shards = _shards("a", "b", "c")
    _catalog(
        shards.values(),
        QueueRow("placed", 2, T0, shards=("b", "c")),
        QueueRow("half", 2, T0, shards=("c",)),  # p1 not placed: home
    )
    store = _sharded(shards, clock)
    _commit(store, "placed", 0, _job(1), _job(2))
    _commit(store, "placed", 1, _job(1))
    _commit(store, "half", 1, _job(1))
    assert store.count(JobFilter("placed", PENDING), T0, future=False) == 3
    assert [shards[n].calls["count"] for n in "abc"] == [0, 1, 1]
    assert store.count(JobFilter("half", PENDING), T0, future=False) == 1
    assert [shards[n].calls["count"] for n in "abc"] == [1, 1, 2]
    # A queue nobody knows reads as one store would: nothing, from home.
    assert store.count(JobFilter("nobody", PENDING), T0, future=False) == 0
    assert [shards[n].calls["count"] for n in "abc"] == [2, 1, 2]


# -- placement: unknown, missing, cached -----------------------------------------------


def test_a_partition_not_placed_yet_is_unknown_until_home_places_it(clock: Clock) -> None:
    """An owner adopts a partition only once home places it (`placed_store`); any other
    call on a partition home does not place is home's, as one store answers for a
    partition its catalog lacks: nothing held, no offset."""
    shards = _shards("a", "b")
    store = _sharded(shards, clock)
    topic = queue_topic(PREFIX, "mail")
    with pytest.raises(PlacementUnknownError, match=r"mail\[0\].*not projected yet.*retry"):
        store.placed_store("mail", 0)
    with pytest.raises(StoreUnavailableError):  # an owner retries it as unavailable
        store.shard_name("mail", 0)
    with pytest.raises(PartitionGoneError, match=r"mail\[0\] has no offset"):
        store.offset(topic, 0)
    with pytest.raises(PartitionGoneError):
        _commit(store, "mail", 0, _job(1))
    assert store.offsets([(topic, 0)]) == {}
    assert store.lookup("mail", [(0, 1)], include_body=False) == []

    # The catalog projected on b only: home does not place it yet.
    _catalog([shards["b"]], QueueRow("mail", 1, T0, shards=("b",)))
    with pytest.raises(PlacementUnknownError):
        store.placed_store("mail", 0)
    assert store.load_jobs("mail", 0, [1]) == {}
    assert store.job_events("mail", 0, 1) == []
    # On home too: the miss reads home again at once, the clock has not moved.
    _catalog([shards["a"]], QueueRow("mail", 1, T0, shards=("b",)))
    assert store.shard_name("mail", 0) == "b"
    assert store.placed_store("mail", 0)[0] == "b"
    with pytest.raises(PlacementUnknownError, match=r"mail\[1\]"):  # past its partitions
        store.shard_name("mail", 1)


def test_a_placement_on_a_shard_missing_from_the_map_is_a_store_error(clock: Clock) -> None:
    shards = _shards("a", "b")
    _catalog(shards.values(), QueueRow("mail", 2, T0, shards=("b", "gone")))
    store = _sharded(shards, clock)
    assert store.shard_name("mail", 0) == "b"
    for call in (
        lambda: store.shard_name("mail", 1),
        lambda: store.count(JobFilter("mail", PENDING), T0, False),
        lambda: store.lookup("mail", [(1, 1)], include_body=False),
    ):
        with pytest.raises(StoreError, match=r"'gone'.*PINLEDGER_STORE_SHARDS") as caught:
            call()
        # Unavailable: a server whose map lacks the shard yet waits for it.
        assert isinstance(caught.value, ShardMissingError)


def test_a_shard_added_to_the_map_is_opened_when_a_partition_is_placed_on_it(
    clock: Clock,
) -> None:
    shards = _shards("a", "b")
    added = CountingStore("c")
    _catalog([*shards.values(), added], QueueRow("mail", 3, T0, shards=("a", "b", "c")))
    opened: list[str] = []

    def opener(name: str) -> LedgerStore | None:
        opened.append(name)
        return added if name == "c" else None  # "c" is in the map now; nothing else is

    store = ShardedStore(PREFIX, shards, refresh_s=2.0, clock=clock, opener=opener)
    assert list(store.shards()) == ["a", "b"]
    _commit(store, "mail", 2, _job(7))
    assert list(store.shards()) == ["a", "b", "c"]
    assert added.load_jobs("mail", 2, [7])[7].local_id == 7
    _commit(store, "mail", 2, _job(8))
    assert opened == ["c"], "opened once"
    _catalog(shards.values(), QueueRow("late", 1, T0, shards=("nowhere",)))
    with pytest.raises(StoreError, match="'nowhere'"):
        store.shard_name("late", 0)


def test_shards_listed_in_a_changed_map_are_opened_at_once(clock: Clock) -> None:
    shards = _shards("a", "b")
    added = CountingStore("c")

    def opener(name: str) -> LedgerStore | None:
        if name == "broken":
            raise StoreUnavailableError("cannot connect")
        return added if name == "c" else None

    store = ShardedStore(PREFIX, shards, refresh_s=2.0, clock=clock, opener=opener)
    assert store.open_listed(["a", "b", "c", "broken", "unknown"]) == ["c"]
    assert list(store.shards()) == ["a", "b", "c"]
    assert store.open_listed(["a", "b", "c"]) == []


def test_a_partition_waits_until_its_shard_has_projected_its_queue(clock: Clock) -> None:
    """An owner starts a partition on its shard only once that shard's own catalog has
    the queue as the home shard has it (not an older queue of the same name)."""
    shards = _shards("a", "b")
    _catalog([shards["a"]], QueueRow("mail", 2, T0 + 5, shards=("a", "b")))
    _catalog([shards["b"]], QueueRow("mail", 2, T0))  # b: the queue deleted since, not yet
    store = _sharded(shards, clock)
    topic = queue_topic(PREFIX, "mail")
    assert store.offset(topic, 0) == 0
    with pytest.raises(PlacementUnknownError, match="store shard 'b' has not projected"):
        store.offset(topic, 1)


def test_a_stale_cache_never_starts_a_moved_partition_on_the_shard_it_left(
    clock: Clock,
) -> None:
    """The home shard does not answer, so a server keeps its cached placements; a
    partition moved from b to c meanwhile is not adopted on b (where its rows are being
    removed): b's own catalog says where it went."""
    shards = _shards("a", "b", "c")
    _catalog(shards.values(), QueueRow("mail", 2, T0))
    for shard in shards.values():
        at = shard.start_offset(CATALOG, 0)
        shard.commit_catalog(CATALOG, at, at + 1, [], [], placed=[PartitionPlaced("mail", 1, "b")])
    store = _sharded(shards, clock)
    assert store.placed_store("mail", 1)[0] == "b"
    for shard in shards.values():
        at = shard.start_offset(CATALOG, 0)
        moved = PartitionMoved("mail", 1, "b", "c", 40)
        shard.commit_catalog(CATALOG, at, at + 1, [], [], placed=[moved])
    shards["a"].fail("home is down")
    clock.now += 5
    assert store.shard_name("mail", 1) == "b"  # the cached placement
    with pytest.raises(PlacementUnknownError, match="store shard 'b' says the partition moved"):
        store.placed_store("mail", 1)
    shards["a"].recover()
    clock.now += 2  # past the second a shard that did not answer is not asked
    assert store.placed_store("mail", 1)[0] == "c"


def test_placements_are_read_again_after_refresh_s(clock: Clock) -> None:
    shards = _shards("a", "b")
    _catalog(shards.values(), QueueRow("mail", 2, T0))
    store = _sharded(shards, clock)
    home = shards["a"]
    assert store.shard_name("mail", 1) == "a"  # not placed: home
    assert home.calls["queues"] == 1
    clock.now += 1.5
    for _ in range(3):
        assert store.shard_name("mail", 0) == "a"
    assert home.calls["queues"] == 1  # cached

    # p1 is placed on b (each shard's catalog projector): seen once the cache is old.
    for shard in shards.values():
        at = shard.start_offset(CATALOG, 0)
        shard.commit_catalog(CATALOG, at, at + 1, [], [], placed=[PartitionPlaced("mail", 1, "b")])
    assert store.shard_name("mail", 1) == "a"
    clock.now += 0.5
    assert store.shard_name("mail", 1) == "b"
    assert home.calls["queues"] == 2
    # queues() is home's, and refreshes the cache.
    assert [q.shards for q in store.queues()] == [("", "b")]
    assert home.calls["queues"] == 3
    clock.now += 1.0
    store.shard_name("mail", 0)
    assert home.calls["queues"] == 3


def test_commit_catalog_goes_to_every_shard(clock: Clock) -> None:
    shards = _shards("a", "b", "c")
    store = _sharded(shards, clock)
    for shard in shards.values():
        shard.start_offset(CATALOG, 0)
    topic = queue_topic(PREFIX, "mail")
    store.commit_catalog(CATALOG, 0, 1, [(QueueRow("mail", 2, T0), [topic])], [])
    assert store.shard_name("mail", 0) == "a"  # read now (the catalog changed)
    store.commit_catalog(CATALOG, 1, 2, [], [], placed=[PartitionPlaced("mail", 0, "c")])
    assert store.shard_name("mail", 0) == "c"  # no wait for refresh_s
    for shard in shards.values():
        assert shard.queues() == [QueueRow("mail", 2, T0, shards=("c",))]
        assert shard.offsets([(CATALOG, 0), (topic, 1)]) == {(CATALOG, 0): 2, (topic, 1): 0}


def test_the_catalog_starts_on_every_shard_for_a_projector_of_the_whole_store(
    clock: Clock,
) -> None:
    """A CatalogProjector over the sharded store (`pinledger project` with a shard map, a
    replay into fresh shards) starts where `start_offset` says and commits to every shard
    from there: a fresh shard gets its catalog offset too, instead of fencing the commit."""
    shards = _shards("a", "b")
    store = _sharded(shards, clock)
    topic = queue_topic(PREFIX, "mail")
    assert store.start_offset(CATALOG, 0) == 0
    store.commit_catalog(CATALOG, 0, 1, [(QueueRow("mail", 1, T0), [topic])], [])
    for shard in shards.values():
        assert shard.offsets([(CATALOG, 0)]) == {(CATALOG, 0): 1}
        assert [q.name for q in shard.queues()] == ["mail"]


# -- partitions placed elsewhere: hidden (moves) ---------------------------------------


def test_each_shard_hides_the_partitions_placed_elsewhere(clock: Clock) -> None:
    shards = _shards("a", "b", "c")
    _catalog(
        shards.values(),
        QueueRow("mail", 4, T0, shards=("b", "", "c", "b")),  # p1 not placed: home (a)
        QueueRow("home", 2, T0),
    )
    store = _sharded(shards, clock)
    assert all(not shard.told for shard in shards.values()), "nothing read, nothing told"
    store.queues()
    assert {name: shard.told for name, shard in shards.items()} == {
        "a": [{"mail": [0, 2, 3]}],
        "b": [{"mail": [1, 2], "home": [0, 1]}],
        "c": [{"mail": [0, 1, 3], "home": [0, 1]}],
    }
    # Read again, unchanged: not told again.
    clock.now += 5
    store.shard_name("mail", 0)
    store.queues()
    assert [len(shard.told) for shard in shards.values()] == [1, 1, 1]

    # A queue created: only the shards whose mapping changed are told.
    _catalog(shards.values(), QueueRow("new", 1, T0, shards=("c",)))
    store.queues()
    assert shards["a"].told[-1] == {"mail": [0, 2, 3], "new": [0]}
    assert shards["b"].told[-1] == {"mail": [1, 2], "home": [0, 1], "new": [0]}
    assert [len(shard.told) for shard in shards.values()] == [2, 2, 1]


def test_a_partition_on_two_shards_during_a_move_counts_once(clock: Clock) -> None:
    """Partition 1 moves from b to a: its rows are rebuilt on a while b still holds them,
    and b's are deleted only after the switch. Every queue-wide read counts them once,
    from the shard the partition is placed on, before the switch and after."""
    shards = _shards("a", "b")
    before = QueueRow("q", 3, T0, shards=("a", "b", "b"))
    _catalog(shards.values(), before)
    store = _sharded(shards, clock)
    _commit(store, "q", 0, _job(1))
    _commit(store, "q", 1, _job(1), _job(2, run_after=T0 - 5))
    _commit(store, "q", 2, _job(1))
    _commit(shards["a"], "q", 1, _job(1), _job(2, run_after=T0 - 5))  # the rebuild on a
    where = JobFilter("q", PENDING)

    def reads() -> tuple[object, ...]:
        scanned = store.scan(where, T0, False, None, 10)
        return (
            store.count(where, T0, False),
            sorted((r.partition, r.job.local_id) for r in scanned),
            [(c.queue, c.jobs) for c in store.job_counts()],
            store.queue_tally("q", T0, 3, 100).pending_due,
            store.holds_jobs_from("q", 1),
        )

    once = (4, [(0, 1), (1, 1), (1, 2), (2, 1)], [("q", 4)], 4, True)
    assert reads() == once
    assert shards["a"].told[-1] == {"q": [1, 2]}
    assert shards["b"].told[-1] == {"q": [0]}

    # The switch: p1 placed on a. b keeps its rows of p1 until they are deleted.
    for shard in shards.values():
        shard.rows = [dataclasses.replace(before, shards=("a", "a", "b"))]
    clock.now += 5  # the cache is read again
    assert reads() == once
    assert shards["a"].told[-1] == {"q": [2]}
    assert shards["b"].told[-1] == {"q": [0, 1]}
    # Without the hiding, b's copy would count twice.
    shards["b"].hide({})
    assert store.count(where, T0, False) == 6


def test_a_shard_opened_later_is_told_what_to_hide_before_it_is_read(clock: Clock) -> None:
    shards = _shards("a", "b")
    added = CountingStore("c")
    _catalog([*shards.values(), added], QueueRow("mail", 2, T0, shards=("b", "c")))
    store = ShardedStore(
        PREFIX, shards, refresh_s=2.0, clock=clock, opener=lambda n: added if n == "c" else None
    )
    assert store.count(JobFilter("mail", PENDING), T0, False) == 0  # opens c
    assert list(store.shards()) == ["a", "b", "c"]
    assert added.told == [{"mail": [0]}]
    assert shards["b"].told == [{"mail": [1]}]
    with pytest.raises(NotImplementedError):
        store.hide({})


# -- the rest of the protocol ----------------------------------------------------------


def test_a_failing_shard_fails_the_calls_that_need_it_with_its_own_error(
    clock: Clock,
) -> None:
    shards = _shards("a", "b")
    _catalog(shards.values(), QueueRow("mail", 2, T0, shards=("", "b")))
    store = _sharded(shards, clock)
    shards["b"].fail("b is down")
    # The error keeps its class and names the shard: which database to look at.
    with pytest.raises(StoreUnavailableError, match=r"^store shard 'b': .*b is down"):
        store.count(JobFilter("mail", PENDING), T0, False)
    with pytest.raises(StoreUnavailableError, match=r"^store shard 'b': .*b is down"):
        _commit(store, "mail", 1, _job(1))
    _commit(store, "mail", 0, _job(1))  # home's partition still works
    assert store.load_jobs("mail", 0, [1])[1].local_id == 1


def test_removing_a_partition_cleans_only_the_shards_it_is_not_placed_on(clock: Clock) -> None:
    """What a move left behind goes, in batches, its offset row first; the placed shard's
    live rows never (the store contract's removal is each shard's own)."""
    shards = _shards("a", "b")
    _catalog(shards.values(), QueueRow("mail", 2, T0, shards=("b", "b")))
    store = _sharded(shards, clock)
    topic = queue_topic(PREFIX, "mail")
    _commit(store, "mail", 0, _job(1), _job(2))
    _commit(shards["a"], "mail", 0, _job(3))  # the rows of a move away from a
    removed = []
    while n := store.remove_partition("mail", topic, 0, limit=1):
        removed.append(n)
    assert removed[:2] == [1, 1]  # the job, then its timeline row, ...
    assert shards["a"].partition_jobs("mail", 0) == {}
    assert shards["a"].offsets([(topic, 0)]) == {}
    assert sorted(store.partition_jobs("mail", 0)) == [1, 2]
    assert store.offset(topic, 0) == 1


def test_the_timelines_days_are_those_of_every_shard(clock: Clock) -> None:
    """A partition placed off home writes its events into its own shard's days."""
    shards = _shards("a", "b")
    store = _sharded(shards, clock)
    day = 86_400_000
    shards["b"].ensure_day_partitions(T0, T0 + day)
    assert store.day_partitions() == shards["b"].day_partitions() != []
    shards["a"].ensure_day_partitions(T0, T0 + 3 * day)
    assert store.day_partitions() == shards["a"].day_partitions()
    assert len(store.day_partitions()) > len(shards["b"].day_partitions())


def test_a_shard_that_just_failed_is_dropped_with_the_others(clock: Clock) -> None:
    """A scratch store is dropped whole, whatever a call just before found."""
    shards = _shards("a", "b")
    store = _sharded(shards, clock)
    shards["b"].fail("b is down")
    with pytest.raises(StoreUnavailableError):
        store.shards()["b"].queues()
    shards["b"].recover()
    store.drop()
    assert [shard.database.schemas for shard in shards.values()] == [{}, {}]


def test_a_shard_that_just_failed_is_closed_with_the_others(clock: Clock) -> None:
    """A server stopping within a second of a shard's failure (while its calls fail
    fast) still closes that shard's connections, and its close does not fail."""
    shards = _shards("a", "b")
    store = _sharded(shards, clock)
    shards["b"].fail("b is down")
    with pytest.raises(StoreUnavailableError):
        store.shards()["b"].queues()
    shards["b"].recover()
    store.close()
    for shard in shards.values():
        with pytest.raises(StoreError, match="closed"):
            shard.queues()


def test_sessions_day_partitions_and_lifecycle(clock: Clock) -> None:
    shards = _shards("a", "b")
    store = _sharded(shards, clock)
    assert (store.kind, store.schema) == ("postgres", "a")
    assert list(store.shards()) == list(shards)
    names = [m.name for m in shards["a"].migration_plan().pending]
    assert names
    assert store.migrate() == names + names  # each shard's, one after the other
    assert all(not shard.migration_plan().pending for shard in shards.values())

    store.end_session("s1", T0 + 1000, T0)
    assert store.session_ended("s1")
    assert not shards["b"].session_ended("s1")

    day = 86_400_000
    made = store.ensure_day_partitions(T0, T0 + 2 * day)
    assert made == 2 * len(shards["a"].day_partitions())
    assert store.day_partitions() == shards["a"].day_partitions()
    assert store.drop_day_partitions_before(T0 + 10 * day) == made

    store.close()
    for shard in shards.values():
        with pytest.raises(StoreError, match="closed"):
            shard.queues()
    with pytest.raises(StoreError):
        store.count(JobFilter("mail", PENDING), T0, False)


def test_a_map_of_one_shard_routes_everything_home(clock: Clock) -> None:
    only = CountingStore("only")
    _catalog([only], QueueRow("mail", 2, T0))
    store = _sharded({"only": only}, clock)
    _commit(store, "mail", 1, _job(1, priority=2))
    assert store.count(JobFilter("mail", PENDING, priority=2), T0, False) == 1
    assert [r.job.local_id for r in store.scan(JobFilter("mail", PENDING), T0, False, None, 5)] == [
        1
    ]
    store.close()


# -- fan-out reads equal one store's ---------------------------------------------------

STATES = (PENDING, IN_PROGRESS, SUCCEEDED, FAILED)
# (partition, local id, run_after step, priority, state): few values, so ties are common.
job_specs = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.integers(0, 5),
        st.integers(-3, 3),
        st.integers(1, 3),
        st.sampled_from(STATES),
    ),
    max_size=40,
)
placements = st.tuples(*[st.sampled_from(["a", "b", "c", ""])] * 4)


def _spec_job(local_id: int, step: int, priority: int, state: JobState) -> Job:
    job = _job(local_id, T0 + step * 1000, priority, state=state)
    if state is IN_PROGRESS:
        return job._replace(claim="c", claim_source="w", touched_at=T0)
    if state is FAILED:
        return job._replace(attempts_remaining=0, custom_status=f"failed-{local_id}")
    return job


Read = Callable[[ScanKey | None, int], list[JobRow]]


def _pages(read: Read, limit: int) -> list[list[JobRow]]:
    """Every page of a keyset read (`read(after, limit)`), each continuing after the
    previous page's last row."""
    pages: list[list[JobRow]] = []
    after: ScanKey | None = None
    while True:
        page = read(after, limit)
        pages.append(page)
        if len(page) < limit:
            return pages
        last = page[-1]
        after = ScanKey(last.job.run_after, last.partition, last.job.local_id)


@settings(max_examples=40, deadline=None)
@given(specs=job_specs, shards_of=placements, page=st.integers(1, 7))
def test_fan_out_reads_merge_to_what_one_store_answers(
    specs: list[tuple[int, int, int, int, JobState]], shards_of: tuple[str, ...], page: int
) -> None:
    jobs: dict[tuple[int, int], Job] = {}
    for partition, local_id, step, priority, state in specs:
        jobs.setdefault((partition, local_id), _spec_job(local_id, step, priority, state))
    by_partition: dict[int, list[Job]] = {}
    for (partition, _), job in jobs.items():
        by_partition.setdefault(partition, []).append(job)

    single = FakeStore("single")
    shards = {name: FakeStore(name) for name in "abc"}
    rows = (QueueRow("q", 4, T0, shards=shards_of), QueueRow("other", 1, T0, shards=("c",)))
    _catalog([single, *shards.values()], *rows)
    sharded = ShardedStore(PREFIX, shards, clock=Clock())
    try:
        for store in (single, sharded):
            for partition, held in by_partition.items():
                _commit(store, "q", partition, *held)
            _commit(store, "other", 0, _job(1), _job(2, priority=3))
        _same_reads(single, sharded, page)
    finally:
        sharded.close()


def _same_reads(single: LedgerStore, sharded: ShardedStore, page: int) -> None:
    now = T0
    for state in STATES:
        for where in (
            JobFilter("q", state),
            JobFilter("q", state, priority=2),
            JobFilter("q", state, regex="-[13]$"),
        ):
            for future in (False, True):
                assert sharded.count(where, now, future) == single.count(where, now, future)
                many = _pages(partial(sharded.scan, where, now, future), page)
                assert many == _pages(partial(single.scan, where, now, future), page)
                everything = single.scan(where, now, future, None, 1000)
                assert [row for p in many for row in p] == everything  # each once, in order
        where = JobFilter("q", state, priority=1)
        assert sharded.select(where, page) == single.select(where, page)
        assert sharded.select(where, 1000) == single.select(where, 1000)
        for search in (
            JobSearch("q", state),
            JobSearch("q", state, priority=3, body_regex="-[0-4]$", status_regex="failed-"),
        ):
            found = _pages(partial(sharded.find_jobs, search), page)
            assert found == _pages(partial(single.find_jobs, search), page)
    assert sharded.counts_as_of("q", now) == single.counts_as_of("q", now)
    assert sharded.job_counts() == single.job_counts()
    for limit in (1, page, 1000):
        assert sharded.due_in_dequeue_order("q", now, limit) == single.due_in_dequeue_order(
            "q", now, limit
        )
    assert sharded.last_event_time("q") == single.last_event_time("q")
    for priorities in (1, 3):
        assert sharded.oldest_due("q", now, priorities) == single.oldest_due("q", now, priorities)
        for cap in (1, 3, 1000):
            assert sharded.queue_tally("q", now, priorities, cap) == single.queue_tally(
                "q", now, priorities, cap
            )
    types = ["enq", "ack"]
    assert sharded.event_buckets("q", types, T0 - 5000, T0 + 5000, 2000) == single.event_buckets(
        "q", types, T0 - 5000, T0 + 5000, 2000
    )
    for first in range(5):
        assert sharded.holds_jobs_from("q", first) == single.holds_jobs_from("q", first)
    olds = [f"old-q-{p}-{i}" for p in range(4) for i in range(6)] + ["never"]
    assert sharded.imported("q", olds) == single.imported("q", olds)
    keys = [(p, i) for p in range(5) for i in range(7)]
    assert sorted(sharded.lookup("q", keys, True), key=_key) == sorted(
        single.lookup("q", keys, True), key=_key
    )


def _key(row: JobRow) -> tuple[int, int]:
    return (row.partition, row.job.local_id)
