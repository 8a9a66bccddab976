"""One `LedgerStore` over several store shards: each partition's calls go to the shard
its projection is placed on (docs/decisions/0031-storage-shards.md).

Because the log is the truth, a partition's projection can live on any database, so
the projection scales out the way the log does. Everything above the store (the
owners, maintenance, the RPC handler, the dashboard) keeps speaking to one store: this
class is the only place that knows there are several. What a caller needs to know of
them (the shards, where a partition is placed, whether partitions move) it asks the
store through the port (projections/store.py `StoreShards`), which a store that is one
database answers for itself: no caller checks a store's type.

- **The home shard** (the map's first) is the truth for the queues and the placement of
  each partition (`QueueRow.shards`); a partition with no placement lives there, so a
  deployment that never placed anything reads as before. Every shard projects the whole
  catalog (its own offset), so any shard can answer for the partitions placed on it.
- **Placements are cached** for `refresh_s` and re-read at once on a miss. A
  placement changes only by a move (`PartitionMoved`), which an owner follows from the
  cache (`Partitions.follow_moves`); otherwise a stale cache can only lack a new queue
  or partition, which a per-partition call's miss finds (a fan-out read may leave out,
  for `refresh_s` at most, a shard that only a new partition is on). An owner adopts a
  partition only on a shard whose own catalog projection places it there
  (`placed_store`), so a stale cache never starts it on the shard it moved from. An
  owner adopting a partition the home shard does not place yet gets
  `PlacementUnknownError`, an unavailable store: it waits for the catalog projection
  (`adopt_unplaced`) rather than project into a guess. Any other call on such a
  partition (its queue deleted or not created yet) is the home shard's, which answers
  as one store answers for a partition its catalog lacks: no rows, no offset. The one
  stale placement is a queue deleted and created again under its name within
  `refresh_s`: a few batches may go to the old queue's shard, and then the first commit
  on the new one is fenced (its offset did not move) and the owner reloads from there;
  the old shard keeps the stray rows.
- **Reads that span a queue fan out** over the shards holding its partitions, in
  parallel, and merge. Scans merge by their keyset: every shard filters strictly after
  the same `ScanKey` and returns its first `limit` rows in the same order, so the first
  `limit` of the merge are the single store's page and a continuation token keeps its
  form. Each shard is told the partitions of each queue placed elsewhere (`hide`, when
  the placements read change), which its queue-wide reads leave out: during a move both
  shards hold the partition's rows, and only the placed one counts them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import PartitionsRetired, Placement, QueuePaused, RecordSkipped
from pinledger.ledger.log import queue_of_topic
from pinledger.ledger.state import Job, JobState
from pinledger.projections.day_partitions import DayPartition
from pinledger.projections.store import (
    ClaimHolder,
    DueJob,
    EventBucket,
    EventRow,
    HeldJob,
    JobCount,
    JobFilter,
    JobRow,
    JobSearch,
    LedgerStore,
    PartitionBatch,
    PlacementUnknownError,
    QueueRow,
    QueueTally,
    ScanKey,
    ScheduleTick,
    StateCount,
    StoreError,
    StoreUnavailableError,
    TableDiff,
    TimelineRow,
    sorted_holders,
)

if TYPE_CHECKING:
    from pinledger.projections.migration_plan import Plan, Progress

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K")

# Queue name -> its row on the home shard.
_Placements = Mapping[str, QueueRow]


class ShardMissingError(StoreUnavailableError):
    """A placement names a shard this server's shard map lacks (yet, or no more)."""


def _keyset(row: JobRow) -> tuple[int, int, int]:
    """The order of scans and the job finder (descending) and of selections
    (ascending): run_after, partition, local_id."""
    return (row.job.run_after, row.partition, row.job.local_id)


def _dequeue_order(due: DueJob) -> tuple[int, int, int, int]:
    """The order of `due_in_dequeue_order` (priority, run_after, local_id, partition)."""
    return (due.priority, due.run_after, due.local_id, due.partition)


# How long a shard that did not answer fails its calls at once (`_Named`).
FAIL_FAST_S = 1.0


class _Named:
    """A shard's store whose errors name the shard (decision 0031, step 5): a caller's
    SHARD_CONNECTION_FAILED, an owner's log line and `/ready` say which database to
    look at. The error keeps its class (unavailable, refused, fenced ...)."""

    def __init__(self, name: str, store: LedgerStore, clock: Callable[[], float]) -> None:
        self._name = name
        self._store = store
        self._clock = clock
        # After the shard did not answer, its calls fail at once until then, with that
        # error: a database that times out (rather than refusing) must not hold up the
        # owner thread's work on the other shards for a pool wait per call.
        self._down_until = float("-inf")
        self._down: StoreUnavailableError | None = None

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._store, attr)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._down is not None and self._clock() < self._down_until:
                raise type(self._down)(str(self._down))  # a fresh one: no growing traceback
            try:
                return value(*args, **kwargs)
            except StoreUnavailableError as exc:
                named = _named(exc, self._name)
                assert isinstance(named, StoreUnavailableError)
                self._down, self._down_until = named, self._clock() + FAIL_FAST_S
                raise named from exc
            except StoreError as exc:
                raise _named(exc, self._name) from exc

        return call

    def hide(self, away: Mapping[str, Sequence[int]]) -> None:
        # Only the store's own state, no database: not failed fast while it is down.
        self._store.hide(away)

    def close(self) -> None:
        # Never failed fast: a shard that just failed still has connections to close.
        self._store.close()

    def drop(self) -> None:
        # Never failed fast either: a scratch schema is dropped whatever a call before
        # found (a drop tries its own connection).
        self._store.drop()


def _named(exc: StoreError, shard: str) -> StoreError:
    prefix = f"store shard {shard!r}: "
    if str(exc).startswith(prefix):
        return exc
    try:
        return type(exc)(prefix + str(exc))
    except TypeError:  # an error with other constructor arguments: as it is
        return exc


class ShardedStore:
    """A LedgerStore routing to the store shards of a shard map (first: home)."""

    def __init__(
        self,
        prefix: str,
        stores: Mapping[str, LedgerStore],
        refresh_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        opener: Callable[[str], LedgerStore | None] | None = None,
    ) -> None:
        if not stores:
            raise ValueError("a ShardedStore needs at least one store shard")
        self.prefix = prefix
        self._stores: Mapping[str, LedgerStore] = MappingProxyType(
            {name: cast(LedgerStore, _Named(name, store, clock)) for name, store in stores.items()}
        )
        self._order = {name: i for i, name in enumerate(self._stores)}
        self._home_name = next(iter(self._stores))
        self._refresh_s = refresh_s
        self._clock = clock
        # Replaced whole, never changed in place: readers on any thread see one
        # consistent (rows, read at) pair without a lock.
        self._cache: tuple[_Placements, float] = ({}, float("-inf"))
        # The caller's thread runs one shard's call, the pool the others: a few threads
        # per shard let concurrent readers fan out without queueing behind each other,
        # and each shard's connection pool bounds them anyway.
        self._pool = ThreadPoolExecutor(
            max_workers=2 * len(self._stores), thread_name_prefix="pinledger-shards"
        )
        self._closed = False
        # Opens a shard the map names now but did not when this store was made (None:
        # not named): a shard added to the map is opened when a partition is first
        # placed on it.
        self._opener = opener
        self._opening = threading.Lock()
        # What each shard was last told to hide (`_hide_elsewhere`), by shard name.
        self._hidden: dict[str, dict[str, tuple[int, ...]]] = {}
        self._hiding = threading.Lock()

    # -- the shard map ----------------------------------------------------------------

    def shards(self) -> Mapping[str, LedgerStore]:
        """Every shard's store, by name, home first."""
        return self._stores

    def supports_moves(self) -> bool:
        """Always, even on a map of one shard: the map may grow, a move then place a
        partition elsewhere."""
        return True

    @property
    def home(self) -> LedgerStore:
        return self._stores[self._home_name]

    def shard_name(self, queue: str, partition: int) -> str:
        """The shard the partition's projection is placed on; PlacementUnknownError when
        the home shard does not place it yet."""
        rows = self._placements([(queue, partition)])
        name = self._shard_in(rows, queue, partition)
        if name is None:
            raise PlacementUnknownError(
                f"{queue}[{partition}]: the partition's placement is not projected yet "
                f"(the home shard {self._home_name!r} does not list it); retry"
            )
        return name

    def store_for(self, queue: str, partition: int) -> LedgerStore:
        """The shard holding the partition's projection. A partition the home shard does
        not place (its queue deleted or not created yet, or past its partitions) is
        home's, as one store holds a partition its catalog lacks: no rows, no offset
        (PartitionGoneError). Only an owner's adoption waits for a placement
        (`placed_store`)."""
        rows = self._placements([(queue, partition)])
        return self._stores[self._shard_in(rows, queue, partition) or self._home_name]

    def _refresh(self) -> _Placements:
        rows = {row.name: row for row in self.home.queues()}
        self._set_cache(rows)
        return rows

    def _set_cache(self, rows: _Placements) -> None:
        with self._hiding:
            self._cache = (rows, self._clock())
            self._hide_elsewhere()

    def _hide_elsewhere(self) -> None:
        """Tell each shard the partitions of each queue the cached rows place on another
        shard (decision 0031, moves). The caller holds `_hiding`."""
        for name, store in self._stores.items():
            self._tell(name, store)

    def _tell(self, name: str, store: LedgerStore) -> None:
        """Tell one shard what the cached rows place elsewhere, if that changed (the
        caller holds `_hiding`)."""
        away = _placed_elsewhere(self._cache[0], name, self._home_name)
        if self._hidden.get(name) != away:
            store.hide(away)
            self._hidden[name] = away

    def _placements(self, wanted: Iterable[tuple[str, int | None]]) -> _Placements:
        """The cached queue rows, read again when older than `refresh_s` or when one of
        `wanted` (queue, partition; None: the queue alone) is missing: at most one read
        of the home shard per call, however many keys miss. While the home shard does
        not answer, the cached rows still serve the keys they hold (a placement never
        changes once made): the home shard down stops its own partitions and what needs
        the catalog, not the partitions on the other shards."""
        rows, read_at = self._cache
        wanted = list(wanted)
        missing = any(
            (row := rows.get(queue)) is None or (p is not None and p >= row.partitions)
            for queue, p in wanted
        )
        if not missing and self._clock() - read_at < self._refresh_s:
            return rows
        try:
            return self._refresh()
        except StoreUnavailableError:
            if missing:
                raise
            # Tried again after `refresh_s`, not on every call while home is down.
            self._cache = (rows, self._clock())
            return rows

    def _shard_in(self, rows: _Placements, queue: str, partition: int) -> str | None:
        """The partition's shard by `rows`; None: not placed yet."""
        row = rows.get(queue)
        if row is None or not 0 <= partition < row.partitions:
            return None
        return self._known(row.shard_of(partition) or self._home_name)

    def _known(self, name: str) -> str:
        if name not in self._stores and not self._open(name):
            # Unavailable, not refused: during a rollout of a map with a new shard, a
            # server whose map lacks it yet waits for it (its owner retries, calls that
            # need it answer SHARD_CONNECTION_FAILED) instead of failing everything.
            raise ShardMissingError(
                f"the projection places partitions on store shard {name!r}, which this "
                f"server's shard map (PINLEDGER_STORE_SHARDS) does not name: add it to "
                f"the map of every server (a shard holding data must stay in the map)"
            )
        return name

    def open_listed(self, names: Iterable[str]) -> list[str]:
        """Open the shards of `names` not open yet (the shard map changed): the catalog's
        owner then projects the catalog into them, and /ready probes them. A shard that
        cannot be opened now is logged and opened when a partition needs it."""
        opened = []
        for name in names:
            if name in self._stores:
                continue
            try:
                if self._open(name):
                    opened.append(name)
            except StoreError as exc:
                log.warning("cannot open store shard %r added to the map yet: %s", name, exc)
        return opened

    def _open(self, name: str) -> bool:
        if self._opener is None:
            return False
        with self._opening:
            if name not in self._stores:
                store = self._opener(name)
                if store is None:
                    return False
                named = cast(LedgerStore, _Named(name, store, self._clock))
                with self._hiding:  # told before any reader can reach it
                    self._tell(name, named)
                    self._order = {**self._order, name: len(self._order)}
                    self._stores = MappingProxyType({**self._stores, name: named})
        return True

    def _queue_stores(self, queue: str) -> list[LedgerStore]:
        """The shards holding a partition of the queue, in the map's order. A queue the
        home shard does not know reads from home alone: what one store would answer
        (a deleted queue's rows go on every shard by the same record)."""
        row = self._placements([(queue, None)]).get(queue)
        if row is None:
            return [self.home]
        names = {self._known(row.shard_of(p) or self._home_name) for p in range(row.partitions)}
        return [self._stores[n] for n in sorted(names, key=self._order.__getitem__)]

    def _by_shard(
        self, keys: Iterable[K], place: Callable[[K], tuple[str, int] | None]
    ) -> dict[str, list[K]]:
        """Keys grouped by shard, in the map's order; `place` says a key's (queue,
        partition), None: home's. A key whose partition is not placed is home's
        (`store_for`), where it is left out as one store leaves out what it never saw."""
        placed = [(key, place(key)) for key in keys]
        rows = self._placements(where for _, where in placed if where is not None)
        groups: dict[str, list[K]] = {}
        for key, where in placed:
            name = None if where is None else self._shard_in(rows, *where)
            groups.setdefault(name or self._home_name, []).append(key)
        return dict(sorted(groups.items(), key=lambda item: self._order[item[0]]))

    def _fan(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Run the calls in parallel (the first on this thread), results in order. A
        shard's StoreError propagates unchanged."""
        if len(calls) <= 1 or self._closed:  # closed: the shards raise their own error
            return [call() for call in calls]
        try:
            futures = [self._pool.submit(call) for call in calls[1:]]
        except RuntimeError:  # the pool shut down meanwhile
            raise StoreUnavailableError("the sharded store is closed") from None
        first = calls[0]()
        return [first, *(future.result() for future in futures)]

    def _over(self, stores: Iterable[LedgerStore], call: Callable[[LedgerStore], T]) -> list[T]:
        return self._fan([partial(call, store) for store in stores])

    def _topic_store(self, topic: str, partition: int) -> LedgerStore:
        """The catalog's offset (and any topic not a queue's) is on home."""
        queue = queue_of_topic(self.prefix, topic)
        return self.home if queue is None else self.store_for(queue, partition)

    def _topic_place(self, key: tuple[str, int]) -> tuple[str, int] | None:
        queue = queue_of_topic(self.prefix, key[0])
        return None if queue is None else (queue, key[1])

    # -- the projector's side: the partition's shard ---------------------------------

    def offset(self, topic: str, partition: int) -> int:
        return self._projected_on(topic, partition).offset(topic, partition)

    def start_offset(self, topic: str, partition: int) -> int:
        if queue_of_topic(self.prefix, topic) is None:
            # The catalog's: recorded on every shard, as `commit_catalog` commits to
            # every shard from the offset this returns (home's). Shards whose catalogs
            # stand at other offsets fence that commit, naming the shard: the servers'
            # owners project the catalog shard by shard, each from its own offset.
            found = [store.start_offset(topic, partition) for store in self._stores.values()]
            return found[0]
        return self._projected_on(topic, partition).start_offset(topic, partition)

    def _projected_on(self, topic: str, partition: int) -> LedgerStore:
        """Where a projector of the topic's partition starts: the placed shard once its
        own catalog agrees (`placed_store`); home for the catalog's topic and for a
        partition not placed (`store_for`)."""
        queue = queue_of_topic(self.prefix, topic)
        if queue is None:
            return self.home
        rows = self._placements([(queue, partition)])
        if self._shard_in(rows, queue, partition) is None:
            return self.home
        return self.placed_store(queue, partition)[1]

    def placed_store(self, queue: str, partition: int) -> tuple[str, LedgerStore]:
        """The shard an owner adopting the partition projects into and serves from (its
        name, its store), once that shard's own catalog has this queue as the home shard
        has it. Before then (the shard was down while the queue was deleted and created
        again under its name, say) the shard may still hold the old queue's offset and
        rows, which its catalog's next records delete: PlacementUnknownError, try
        again. The owner keeps this store until the partition moves (decision 0031)."""
        name = self.shard_name(queue, partition)
        store = self._stores[name]
        truth = self._cache[0].get(queue)
        own = next((r for r in store.queues() if r.name == queue), None)
        if (
            truth is None
            or own is None
            or own.created_at != truth.created_at
            or own.partitions <= partition
        ):
            raise PlacementUnknownError(
                f"{queue}[{partition}]: store shard {name!r} has not projected the "
                "queue's catalog records the home shard has yet; retry"
            )
        if (own.shard_of(partition) or self._home_name) != name:
            # The shard's own catalog says the partition moved away (a move this
            # server's cache has not seen yet: the home shard did not answer): never
            # start it where its rows are being removed.
            self.forget_placements()
            raise PlacementUnknownError(
                f"{queue}[{partition}]: store shard {name!r} says the partition moved to "
                f"{own.shard_of(partition) or self._home_name!r}; retry once this server "
                "reads the placements again"
            )
        return name, store

    def forget_placements(self) -> None:
        """Read the placements again on the next call (a partition was found moved)."""
        self._cache = (self._cache[0], float("-inf"))

    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        groups = self._by_shard(partitions, self._topic_place)
        found: dict[tuple[str, int], int] = {}
        for part in self._fan([partial(self._stores[n].offsets, k) for n, k in groups.items()]):
            found.update(part)
        return found

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        return self.store_for(queue, partition).load_jobs(queue, partition, ids)

    def keyed_jobs(self, queue: str, partition: int, keys: Iterable[str]) -> list[Job]:
        return self.store_for(queue, partition).keyed_jobs(queue, partition, keys)

    def partition_jobs(
        self, queue: str, partition: int, states: Iterable[JobState] = tuple(JobState)
    ) -> dict[int, Job]:
        return self.store_for(queue, partition).partition_jobs(queue, partition, states)

    def partition_traceparents(
        self, queue: str, partition: int, states: Iterable[JobState]
    ) -> dict[int, str]:
        return self.store_for(queue, partition).partition_traceparents(queue, partition, states)

    def ready_jobs(
        self, queue: str, partition: int, priority: int, after: tuple[int, int], limit: int
    ) -> list[HeldJob]:
        store = self.store_for(queue, partition)
        return store.ready_jobs(queue, partition, priority, after, limit)

    def expired_claims(
        self, queue: str, partition: int, touched_before: int, limit: int
    ) -> list[HeldJob]:
        store = self.store_for(queue, partition)
        return store.expired_claims(queue, partition, touched_before, limit)

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        self.store_for(batch.queue, batch.partition).commit_partition_batch(batch)

    def skipped_records(self, queue: str, partition: int) -> dict[int, str]:
        # Every shard projects the catalog: the partition's own shard answers.
        return self.store_for(queue, partition).skipped_records(queue, partition)

    def remove_partition(self, queue: str, topic: str, partition: int, limit: int) -> int:
        """A batch of the partition's rows left on the shards it is not placed on (where
        it moved from, or a move's target that was abandoned); never its placed shard's."""
        placed = self.shard_name(queue, partition)
        strays = [store for name, store in self._stores.items() if name != placed]
        return sum(self._over(strays, lambda s: s.remove_partition(queue, topic, partition, limit)))

    def commit_catalog(
        self,
        topic: str,
        expected_offset: int,
        next_offset: int,
        created: Sequence[tuple[QueueRow, Sequence[str]]],
        deleted: Sequence[tuple[str, str]],
        resized: Sequence[tuple[QueueRow, Sequence[str]]] = (),
        retired: Sequence[PartitionsRetired] = (),
        placed: Sequence[Placement] = (),
        skipped: Sequence[RecordSkipped] = (),
        paused: Sequence[QueuePaused] = (),
        ticks: Sequence[ScheduleTick] = (),
    ) -> None:
        # Every shard holds the catalog. In order, home first, one after the other: for
        # stores at the same catalog offset (a replay into new schemas); live servers run
        # one CatalogProjector per shard, each from its own offset.
        for store in self._stores.values():
            store.commit_catalog(
                topic,
                expected_offset,
                next_offset,
                created,
                deleted,
                resized,
                retired,
                placed,
                skipped,
                paused,
                ticks,
            )
        # The queues or placements may have changed: the next call reads them again.
        self.forget_placements()

    def expired(
        self, queue: str, partition: int, succeeded_before: int, failed_before: int, limit: int
    ) -> list[Job]:
        store = self.store_for(queue, partition)
        return store.expired(queue, partition, succeeded_before, failed_before, limit)

    def queues(self) -> list[QueueRow]:
        # Home's rows are the truth; reading them is a refresh of the cache too.
        rows = self.home.queues()
        self._set_cache({row.name: row for row in rows})
        return rows

    def schedule_ticks(self, queue: str | None = None) -> list[ScheduleTick]:
        # The catalog's, as the queues: home's rows are the truth.
        return self.home.schedule_ticks(queue)

    def holds_jobs_from(self, queue: str, first: int) -> bool:
        stores = self._queue_stores(queue)
        return any(self._over(stores, lambda s: s.holds_jobs_from(queue, first)))

    # -- the readers' side -----------------------------------------------------------

    def check_regex(self, regex: str | None) -> None:
        # Home's dialect judges (its `kind`); a shard of the other dialect that cannot
        # use the regex refuses the query itself, with InvalidRegexError.
        self.home.check_regex(regex)

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        groups = self._by_shard(keys, lambda key: (queue, key[0]))
        calls = [
            partial(self._stores[name].lookup, queue, part, include_body)
            for name, part in groups.items()
        ]
        return list(itertools.chain.from_iterable(self._fan(calls)))

    def imported(self, queue: str, old_descriptors: Sequence[str]) -> dict[str, JobDescriptor]:
        found: dict[str, JobDescriptor] = {}
        stores = self._queue_stores(queue)
        for part in self._over(stores, lambda s: s.imported(queue, old_descriptors)):
            # A descriptor imported on two shards (imported twice): the earlier shard's
            # stays, as a store keeps a descriptor's first import.
            for old, new in part.items():
                found.setdefault(old, new)
        return found

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        stores = self._queue_stores(where.queue)
        return sum(self._over(stores, lambda s: s.count(where, now, future)))

    def scan(
        self, where: JobFilter, now: int, future: bool, after: ScanKey | None, limit: int
    ) -> list[JobRow]:
        stores = self._queue_stores(where.queue)
        pages = self._over(stores, lambda s: s.scan(where, now, future, after, limit))
        return _first(heapq.merge(*pages, key=_keyset, reverse=True), limit)

    def select(self, where: JobFilter, limit: int) -> list[JobRow]:
        stores = self._queue_stores(where.queue)
        pages = self._over(stores, lambda s: s.select(where, limit))
        return _first(heapq.merge(*pages, key=_keyset), limit)

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        return self.store_for(queue, partition).job_events(queue, partition, local_id)

    def timeline(self, queue: str, partition: int, local_id: int) -> list[TimelineRow]:
        return self.store_for(queue, partition).timeline(queue, partition, local_id)

    def job_counts(self) -> list[JobCount]:
        # Every queue: every shard.
        counts: Counter[tuple[str, JobState, int]] = Counter()
        for part in self._over(self._stores.values(), lambda s: s.job_counts()):
            for c in part:
                counts[c.queue, c.state, c.priority] += c.jobs
        return [JobCount(q, s, p, n) for (q, s, p), n in sorted(counts.items())]

    def counts_as_of(self, queue: str, now: int) -> list[StateCount]:
        counts: Counter[tuple[JobState, int, bool]] = Counter()
        for part in self._over(self._queue_stores(queue), lambda s: s.counts_as_of(queue, now)):
            for c in part:
                counts[c.state, c.priority, c.future] += c.jobs
        return [StateCount(s, p, f, n) for (s, p, f), n in sorted(counts.items())]

    def due_in_dequeue_order(self, queue: str, now: int, limit: int) -> list[DueJob]:
        stores = self._queue_stores(queue)
        pages = self._over(stores, lambda s: s.due_in_dequeue_order(queue, now, limit))
        return _first(heapq.merge(*pages, key=_dequeue_order), limit)

    def last_event_time(self, queue: str) -> int | None:
        times = self._over(self._queue_stores(queue), lambda s: s.last_event_time(queue))
        return max((t for t in times if t is not None), default=None)

    # -- the verify's streams: the partition's shard ---------------------------------

    def stream_jobs(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[HeldJob]:
        return self.store_for(queue, partition).stream_jobs(queue, partition, lo, hi)

    def stream_events(self, queue: str, partition: int, from_offset: int) -> Iterator[EventRow]:
        return self.store_for(queue, partition).stream_events(queue, partition, from_offset)

    def job_lines(
        self, queue: str, partition: int, lo: int | None, hi: int | None
    ) -> Iterator[bytes]:
        return self.store_for(queue, partition).job_lines(queue, partition, lo, hi)

    def event_lines(self, queue: str, partition: int, from_offset: int) -> Iterator[bytes]:
        return self.store_for(queue, partition).event_lines(queue, partition, from_offset)

    # -- the dashboard's reads -------------------------------------------------------

    def find_jobs(self, search: JobSearch, after: ScanKey | None, limit: int) -> list[JobRow]:
        stores = self._queue_stores(search.queue)
        pages = self._over(stores, lambda s: s.find_jobs(search, after, limit))
        return _first(heapq.merge(*pages, key=_keyset, reverse=True), limit)

    def oldest_due(self, queue: str, now: int, priorities: int) -> int | None:
        stores = self._queue_stores(queue)
        found = self._over(stores, lambda s: s.oldest_due(queue, now, priorities))
        return min((t for t in found if t is not None), default=None)

    def claim_holders(self, queue: str, limit: int) -> list[ClaimHolder]:
        # A source may hold jobs on several shards: summed, its latest heartbeat kept.
        # Each shard's answer is whole for the sources it lists up to `limit`; a source
        # cut from one shard's list is undercounted only past the limit's many sources.
        held: dict[str, tuple[int, int]] = {}
        for part in self._over(self._queue_stores(queue), lambda s: s.claim_holders(queue, limit)):
            for h in part:
                jobs, last = held.get(h.source, (0, 0))
                held[h.source] = (jobs + h.jobs, max(last, h.last_heartbeat))
        return sorted_holders([ClaimHolder(s, n, t) for s, (n, t) in held.items()], limit)

    def event_buckets(
        self, queue: str, types: Sequence[str], since: int, until: int, bucket_ms: int
    ) -> list[EventBucket]:
        counts: Counter[tuple[int, str]] = Counter()
        stores = self._queue_stores(queue)
        for part in self._over(
            stores, lambda s: s.event_buckets(queue, types, since, until, bucket_ms)
        ):
            for bucket in part:
                counts[bucket.start, bucket.type] += bucket.events
        return [EventBucket(start, kind, n) for (start, kind), n in sorted(counts.items())]

    def queue_tally(self, queue: str, now: int, priorities: int, cap: int) -> QueueTally:
        stores = self._queue_stores(queue)
        tallies = self._over(stores, lambda s: s.queue_tally(queue, now, priorities, cap))
        return QueueTally(*(min(sum(field), cap) for field in zip(*tallies, strict=True)))

    # -- sessions: home's ------------------------------------------------------------

    def end_session(self, session_id: str, until_ms: int, now: int) -> None:
        self.home.end_session(session_id, until_ms, now)

    def session_ended(self, session_id: str) -> bool:
        return self.home.session_ended(session_id)

    # -- the timeline's day partitions: every shard has a timeline -------------------

    def day_partitions(self) -> list[DayPartition]:
        # The days any shard's timeline has: a partition placed on another shard than
        # home writes its events into that shard's days only.
        found = self._over(self._stores.values(), lambda s: s.day_partitions())
        return sorted(set(itertools.chain.from_iterable(found)))

    def ensure_day_partitions(self, from_ms: int, to_ms: int) -> int:
        stores = self._stores.values()
        return sum(self._over(stores, lambda s: s.ensure_day_partitions(from_ms, to_ms)))

    def drop_day_partitions_before(self, cutoff: int) -> int:
        stores = self._stores.values()
        return sum(self._over(stores, lambda s: s.drop_day_partitions_before(cutoff)))

    # -- lifecycle -------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.home.kind

    @property
    def schema(self) -> str:
        return self.home.schema

    def migrate(self, *, allow_pause: bool = False, progress: Progress | None = None) -> list[str]:
        # One shard after the other: a migration's progress and a refusal (a pause
        # needed) read as one store's would.
        applied: list[str] = []
        for store in self._stores.values():
            applied += store.migrate(allow_pause=allow_pause, progress=progress)
        return applied

    def migration_plan(self) -> Plan:
        return self.home.migration_plan()

    def hide(self, away: Mapping[str, Sequence[int]]) -> None:
        """Refused: this store tells its shards what to hide itself, from the placements
        (a caller's mapping would be replaced at the next refresh anyway)."""
        raise NotImplementedError("a ShardedStore hides on its shards from their placements")

    def close(self) -> None:
        self._closed = True
        try:
            self._each_shard(lambda s: s.close())
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def drop(self) -> None:
        self._each_shard(lambda s: s.drop())

    def _each_shard(self, call: Callable[[LedgerStore], None]) -> None:
        """Every shard, even after one fails; the first failure is raised."""
        failure: BaseException | None = None
        for store in self._stores.values():
            try:
                call(store)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def diff(
        self,
        *,
        other_schema: str,
        table: str,
        queue_column: str,
        partition_column: str,
        queues: Sequence[str],
        partition: int | None,
        limit: int,
    ) -> TableDiff:
        # Home's: a replay into a schema goes shard by shard, each shard's own store
        # (cli/replay.py), so only a one-shard map gets here.
        return self.home.diff(
            other_schema=other_schema,
            table=table,
            queue_column=queue_column,
            partition_column=partition_column,
            queues=queues,
            partition=partition,
            limit=limit,
        )


def _placed_elsewhere(rows: _Placements, shard: str, home: str) -> dict[str, tuple[int, ...]]:
    """Per queue, its partitions not placed on `shard` (one not placed is on `home`);
    queues with none left out."""
    away = {}
    for name, row in rows.items():
        others = tuple(p for p in range(row.partitions) if (row.shard_of(p) or home) != shard)
        if others:
            away[name] = others
    return away


def _first(rows: Iterable[T], limit: int) -> list[T]:
    return list(itertools.islice(rows, max(limit, 0)))
