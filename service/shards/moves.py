"""Moving a partition's projection to another store shard by replaying its log
(`pinledger move-partition`, decision 0031).

1. Build: the partition's log is projected into the target shard by the projector the
   owners use, from the target's own offset row: a second run resumes where the first
   stopped; a target that holds nothing yet is cleared of any rows of the partition
   first (a move away from it whose clean-up did not finish). Memory is one batch of
   records and the jobs it touches (read from the target), whatever the backlog.
2. Switch: once a pass catching the target up to the log's end took `quick_s` or less, a
   `PartitionMoved` record in the catalog places the partition on the target, naming
   the offset the target had reached. The partition's owner sees it within seconds
   (Partitions.follow_moves): it stops serving the partition, reads its window from the
   target, projects into the target from where the target is to the log's end, and
   serves again. Claims are log records and the window is read only from a shard that
   projects every one of them before the partition serves: no job is handed out twice,
   none is lost.
3. Clean-up: after `settle_s` (every server's placements are read again within two
   seconds), the partition's rows on every other shard are deleted in batches, the
   offset row first, which fences a projector that would still write there.

Every step can be run again: a move already switched goes on to the clean-up (after
`settle_s`, unless a clean-up has begun), which stops if the partition has moved on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pinledger.ledger.events import Actor, PartitionMoved
from pinledger.ledger.log import Log, Position, queue_topic
from pinledger.ledger.state import Job
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.store import LedgerStore, QueueRow
from pinledger.service.shards.shard_map import ShardMap

# Records read and projected per batch (and so held in memory at once).
BATCH = 2000
# The target switches after a pass over what the log held when the pass began took
# this long or less: the owner projects what came meanwhile while the partition's
# dequeues pause. (Records are no measure: a group record may hold a thousand jobs.)
QUICK_S = 0.5
# Rows deleted per statement on the old shard.
REMOVE_BATCH = 5000


class MoveRefusedError(ValueError):
    """A move that cannot be made as asked (no such queue, partition or shard, or a
    store that is one database)."""


class _NoJobs:
    """The mover's job cache: none. Each batch reads the jobs it touches from the
    target in one query, so memory stays one batch whatever the partition holds."""

    def lookup(self, ids: Iterable[int]) -> dict[int, Job]:
        return {}

    def absorb(self, jobs: object) -> None:
        pass


@dataclass
class MoveReport:
    queue: str
    partition: int
    source: str
    target: str
    # Records projected into the target by this run, and how long that took.
    records: int = 0
    build_s: float = 0.0
    # The target's offset when the move was recorded (None: switched before this run).
    switched_at: int | None = None
    # Rows deleted from the other shards, and how long that took.
    removed: int = 0
    clean_s: float = 0.0


class Mover:
    def __init__(
        self,
        store: LedgerStore,
        log: Log,
        writer: LedgerWriter,
        shard_map: ShardMap,
        actor: Actor,
        say: Callable[[str], None] = print,
        settle_s: float = 10.0,
        quick_s: float = QUICK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not store.supports_moves():
            raise MoveRefusedError(
                f"the store ({store.kind}, schema {store.schema}) is one database, whose "
                "partitions cannot move: moving one needs a shard map "
                "(PINLEDGER_STORE_SHARDS, docs/guides/scaling.md#store-shards)"
            )
        self.store = store
        self.log = log
        self.writer = writer
        self.shard_map = shard_map
        self.actor = actor
        self.say = say
        self.settle_s = settle_s
        self.quick_s = quick_s
        self.clock = clock

    def targets_off(self, source: str, queues: Iterable[QueueRow]) -> list[tuple[str, int, str]]:
        """(queue, partition, target) for every partition placed on `source`, each to
        the writable shard other than `source` holding the fewest partitions (draining a
        shard, `--from`)."""
        home = self.shard_map.shards[0].name
        writable = [s.name for s in self.shard_map.writable if s.name != source]
        if not writable:
            raise MoveRefusedError(
                f"no shard to move to: every shard other than {source!r} is dequeueOnly"
            )
        rows = list(queues)
        counts = dict.fromkeys(writable, 0)
        moves = []
        for row in rows:
            for p in range(row.partitions):
                shard = row.shard_of(p) or home
                if shard in counts:
                    counts[shard] += 1
        for row in sorted(rows, key=lambda r: r.name):
            for p in range(row.partitions):
                if (row.shard_of(p) or home) == source:
                    target = min(writable, key=lambda n: (counts[n], writable.index(n)))
                    counts[target] += 1
                    moves.append((row.name, p, target))
        return moves

    def move(self, queue: str, partition: int, target: str, at: Callable[[], int]) -> MoveReport:
        row = self._row(queue)
        if not 0 <= partition < row.partitions:
            raise MoveRefusedError(
                f"queue {queue!r} has partitions 0..{row.partitions - 1}, not {partition}"
            )
        shard = self.shard_map.get(target)
        if shard is None:
            names = ", ".join(s.name for s in self.shard_map.shards)
            raise MoveRefusedError(f"no store shard {target!r} in the shard map ({names})")
        home = self.shard_map.shards[0].name
        placed = row.shard_of(partition)
        source = placed or home
        report = MoveReport(queue, partition, source, target)
        topic = queue_topic(self.writer.prefix, queue)
        if source != target:
            if shard.dequeue_only:
                raise MoveRefusedError(
                    f"store shard {target!r} is dequeueOnly: it takes no partitions"
                )
            self.store.open_listed([target])
            goal = self.store.shards()[target]
            started = self.clock()
            projector = self._build(goal, queue, topic, partition, report)
            report.build_s = self.clock() - started
            report.switched_at = projector.next_offset
            self.writer.move_partition(
                PartitionMoved(queue, partition, placed or "", target, projector.next_offset),
                at(),
                self.actor,
            )
            self._await_placement(queue, partition, target)
            self.say(
                f"{queue}[{partition}] placed on {target!r} at offset "
                f"{projector.next_offset}; its owner serves it from {target!r} once it has "
                f"projected the rest (waiting {self.settle_s:.0f} s before removing it "
                "elsewhere)"
            )
            time.sleep(self.settle_s)
        elif self._held_elsewhere(topic, partition, target):
            # Switched by an earlier run that stopped before its clean-up: the servers
            # may not have followed the move yet.
            self.say(
                f"{queue}[{partition}] is on {target!r}; waiting {self.settle_s:.0f} s "
                "before removing it elsewhere"
            )
            time.sleep(self.settle_s)
        started = self.clock()
        report.removed = self._clean(queue, topic, partition, target)
        report.clean_s = self.clock() - started
        return report

    def _row(self, queue: str) -> QueueRow:
        for row in self.store.queues():
            if row.name == queue:
                return row
        raise MoveRefusedError(f"no queue {queue!r} in the catalog projection")

    def _build(
        self, goal: LedgerStore, queue: str, topic: str, partition: int, report: MoveReport
    ) -> PartitionProjector:
        """Project the partition's log into the target, pass after pass, until a pass
        took `quick_s` or less."""
        # The one place a queue partition's offset is recorded outside the catalog's
        # projection: the target of a move (decision 0032).
        if goal.start_offset(topic, partition) == 0:
            # Nothing projected here yet: leftovers of an earlier placement go first.
            while goal.remove_partition(queue, topic, partition, REMOVE_BATCH):
                pass
            goal.start_offset(topic, partition)  # the clean-up took the row first
        projector = PartitionProjector(goal, queue, topic, partition, cache=_NoJobs())
        start = projector.next_offset
        self._check_history(queue, topic, partition, start, report.target)
        if start:
            self.say(f"{queue}[{partition}]: resuming on {report.target!r} from offset {start}")
        reader = self.log.reader([Position(topic, partition, start)])
        shown = began = self.clock()
        try:
            while True:
                # A pass catches up to the end as it was when the pass began; the switch
                # comes after a quick pass, so the owner has a moment's records left.
                end = self.log.end_offsets([(topic, partition)]).get((topic, partition), 0)
                if projector.next_offset >= end:
                    break
                passed = self.clock()
                while projector.next_offset < end:
                    projector.apply(reader.poll(BATCH, 500))
                    now = self.clock()
                    if now - shown >= 2.0:
                        shown = now
                        rate = (projector.next_offset - start) / max(now - began, 1e-9)
                        self.say(
                            f"{queue}[{partition}] -> {report.target!r}: offset "
                            f"{projector.next_offset:,} of {end:,} ({rate:,.0f} records/s)"
                        )
                if self.clock() - passed <= self.quick_s:
                    break
        finally:
            reader.close()
        report.records = projector.next_offset - start
        return projector

    def _check_history(
        self, queue: str, topic: str, partition: int, start: int, target: str
    ) -> None:
        """Refuse to rebuild a partition whose log no longer starts where the target
        must start: with a retention, the records of delayed jobs, of an old backlog or
        of failed jobs kept for their TTL may be gone, and the target would lack those
        jobs for good after the switch."""
        first = self.log.start_offsets([(topic, partition)]).get((topic, partition), 0)
        if start < first:
            raise MoveRefusedError(
                f"{queue}[{partition}]: the log holds its records from offset {first:,} on "
                f"only (the topic's retention removed the older ones), and store shard "
                f"{target!r} would have to be built from offset {start:,}: a rebuild from "
                "the log would lose the jobs whose records are gone. The partition stays "
                "where it is; moving it needs the whole log "
                "(docs/guides/scaling.md#moving-a-partition)"
            )

    def _await_placement(self, queue: str, partition: int, target: str) -> None:
        """Until the home shard's catalog projection places the partition on the target
        (the servers read their placements from there)."""
        deadline = self.clock() + 60.0
        while self.clock() < deadline:
            row = self._row(queue)
            if row.shard_of(partition) == target:
                return
            time.sleep(0.2)
        raise TimeoutError(
            f"{queue}[{partition}]: the move is recorded but the home shard's catalog "
            "projection has not placed it on the target within 60 s; is a server running? "
            "Run the command again to finish the move"
        )

    def _held_elsewhere(self, topic: str, partition: int, target: str) -> bool:
        """Whether a shard other than the target still has the partition's offset row
        (a clean-up that has begun there removed it first)."""
        return any(
            store.offsets([(topic, partition)])
            for name, store in self.store.shards().items()
            if name != target
        )

    def _still_on(self, queue: str, partition: int, target: str) -> bool:
        """Whether the partition is still placed on the target (another move may have
        taken it on meanwhile: then the target's rows are live elsewhere's concern)."""
        home = self.shard_map.shards[0].name
        return (self._row(queue).shard_of(partition) or home) == target

    def _clean(self, queue: str, topic: str, partition: int, target: str) -> int:
        removed = 0
        for name, shard in self.store.shards().items():
            if name == target:
                continue
            shown = self.clock()
            while True:
                if not self._still_on(queue, partition, target):
                    self.say(
                        f"{queue}[{partition}] moved on from {target!r} meanwhile: its rows "
                        "are left to that move's clean-up"
                    )
                    return removed
                n = shard.remove_partition(queue, topic, partition, REMOVE_BATCH)
                if not n:
                    break
                removed += n
                if self.clock() - shown >= 2.0:
                    shown = self.clock()
                    self.say(f"{queue}[{partition}]: {removed:,} rows removed from {name!r}")
        return removed
