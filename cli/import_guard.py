"""Makes room for PinLater's descriptors before `pinledger import-pinlater` imports a
queue, so that no pinledger descriptor ever equals an imported PinLater descriptor
(docs/decisions/0017-imported-descriptors.md).

A PinLater descriptor `q:s<n>:p<P>:<L>` has pinledger's shape: it reads as job L of
partition n, and pinledger gives local id L to job L % 1000 of the record at offset
L // 1000. Only a shard named by a decimal number n can collide, and only with
partition n of the queue. Before anything of the queue is imported, for each such
shard and partition:

- the partition's end is pushed past the largest PinLater id to import (H): empty
  records ("fillers", no events, one per 1000 ids) until the next record's offset is
  above H // 1000, so every id pinledger gives out from then on, to imported and to
  native jobs alike, is above H;
- the records below that, from offset L // 1000 of the smallest id to import, that are
  not our fillers (jobs enqueued before, by clients or by an earlier import) are read:
  if one of their jobs has the descriptor of a PinLater job still to import, the
  import is refused, naming it, since the two could not be told apart.

The import then takes only ids up to H (PinLater jobs added since wait for the next
run, which makes room again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pinledger.ledger import codec
from pinledger.ledger.descriptor import JOBS_PER_RECORD, JobDescriptor, local_id_for
from pinledger.ledger.events import Actor, Enqueued, Event
from pinledger.ledger.log import Log, Position
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pinlater.reader import PinLaterShard, PinLaterSource

# Fillers per append call: one round trip for up to this many empty records.
FILLERS_PER_APPEND = 10_000
# Empty polls in a row after which records the check needs count as missing.
EMPTY_POLLS = 10


class ImportRefusedError(RuntimeError):
    """The queue holds a pinledger job whose descriptor equals the PinLater descriptor
    of a job to import: the message names it and says what to do."""


@dataclass(frozen=True, slots=True)
class Room:
    """What `make_room` did and allows: the largest id to import per (database,
    priority), and the fillers appended per partition."""

    upto: dict[tuple[str, int], int]
    fillers: dict[int, int]


def old_descriptor(queue: str, shard: str, priority: int, local_id: int) -> str:
    """The descriptor PinLater gave a job, in pinledger's spelling when its shard is a
    number (`s01` reads as partition 1, as lookupJobs parses it)."""
    if shard.isascii() and shard.isdigit():
        return str(JobDescriptor(queue, int(shard), priority, local_id))
    return f"{queue}:s{shard}:p{priority}:{local_id}"


def make_room(
    source: PinLaterSource,
    writer: LedgerWriter,
    log: Log,
    queue: str,
    shards: Sequence[PinLaterShard],
    partitions: int,
    at: int,
    actor: Actor,
) -> Room:
    """Push each partition a PinLater shard's descriptors can name past the shard's ids
    to import, and check what is below; raises ImportRefusedError on a collision."""
    upto: dict[tuple[str, int], int] = {}
    fillers: dict[int, int] = {}
    for shard in shards:
        ranges = {p: source.pending_range(shard, p) for p in shard.priorities}
        for priority, found in ranges.items():
            if found is not None:
                upto[(shard.database, priority)] = found[1]
        pending = [r for r in ranges.values() if r is not None]
        if not pending or not (shard.shard.isascii() and shard.shard.isdigit()):
            continue
        partition = int(shard.shard)
        if partition >= partitions:
            continue  # no partition n: nothing pinledger gives out can read the same
        low, high = min(r[0] for r in pending), max(r[1] for r in pending)
        ours = _push_past(writer, log, queue, partition, high, at, actor)
        fillers[partition] = fillers.get(partition, 0) + len(ours)
        natives = _enqueued_ids(log, writer.topic(queue), partition, low, high, ours)
        for priority, ids in sorted(natives.items()):
            if priority not in shard.priorities:
                continue
            clash = source.pending_among(shard, priority, sorted(ids))
            if clash:
                raise ImportRefusedError(
                    f"queue {queue!r}: partition {partition} already holds "
                    f"{len(clash)} job(s) whose descriptors equal PinLater descriptors of "
                    f"{shard.database}.jobs_p{priority} still to import (first: "
                    f"{JobDescriptor(queue, partition, priority, clash[0])}); the two could "
                    "not be told apart. Import into a queue before it takes jobs, or into "
                    "a new queue (--queue, after renaming the PinLater databases)."
                )
    return Room(upto, fillers)


def _push_past(
    writer: LedgerWriter, log: Log, queue: str, partition: int, high: int, at: int, actor: Actor
) -> set[int]:
    """Append fillers until the partition's next record's ids are all above `high`;
    returns the fillers' offsets."""
    target = high // JOBS_PER_RECORD  # the last offset whose ids can reach `high`
    ours: set[int] = set()
    while (end := log.end_offset(writer.topic(queue), partition)) <= target:
        count = min(target - end + 1, FILLERS_PER_APPEND)
        empty: Sequence[Event] = ()
        ours.update(writer.append_records([(queue, partition, empty)] * count, at, actor))
    return ours


def _enqueued_ids(
    log: Log, topic: str, partition: int, low: int, high: int, skip: set[int]
) -> dict[int, set[int]]:
    """Local ids in low..high of jobs enqueued in the partition's records other than
    `skip`, by priority. Records the log no longer holds (retention) cannot be checked:
    refused."""
    start, end = low // JOBS_PER_RECORD, high // JOBS_PER_RECORD + 1
    wanted = [o for o in range(start, end) if o not in skip]
    found: dict[int, set[int]] = {}
    if not wanted:
        return found
    reader = log.reader([Position(topic, partition, wanted[0])])
    expected, empties = wanted[0], 0
    try:
        while expected <= wanted[-1]:
            records = reader.poll(1000, 1000)
            empties = 0 if records else empties + 1
            if empties >= EMPTY_POLLS:
                raise ImportRefusedError(
                    f"{topic}[{partition}]: could not read offsets {expected}..{wanted[-1]} "
                    "to check them against PinLater's descriptors"
                )
            for record in records:
                gap = [o for o in range(expected, min(record.offset, end)) if o not in skip]
                if gap:
                    raise ImportRefusedError(
                        f"{topic}[{partition}]: offsets {gap[0]}..{gap[-1]} are no longer "
                        "in the log, so they cannot be checked against PinLater's "
                        "descriptors; import into a new queue"
                    )
                expected = record.offset + 1
                if record.offset in skip or record.offset >= end:
                    continue
                for idx, event in enumerate(codec.record_events(record.value, record.headers)):
                    local_id = local_id_for(record.offset, idx)
                    if isinstance(event, Enqueued) and low <= local_id <= high:
                        found.setdefault(event.priority, set()).add(local_id)
    finally:
        reader.close()
    return found
