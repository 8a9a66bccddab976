"""The cluster's ledger format: which record forms servers may write, so that a rolling
upgrade never has a server write what another live server cannot read (decision 0025,
as Kafka's `metadata.version` does for brokers).

- Format 1: plain records, one envelope of codec version 1 each (ledger/codec.py), and
  the catalog's queue events. Every release reads it.
- Format 2: also group records (several callers' envelopes in one record, decision
  0020), the catalog's `FormatRaised` records, and its `QueueResized` and
  `PartitionsRetired` records (a queue resized live, decision 0030), and its
  `PartitionPlaced` and `PartitionMoved` records (a partition's projection on a store
  shard, and moved to another, decision 0031).

Each server advertises the formats it reads in its membership of the owners' group
(`advertisement`); the format the cluster writes is the last `FormatRaised` of the
catalog (format 1 when there is none: a catalog written before formats existed). It is
raised only when every live member reads the new one (`blockers`), by `pinledger
upgrade-format`; a catalog created by this release starts at `LATEST`. A server that
cannot read the cluster's format refuses to start (`unreadable`).

A later format adds a constant here, adds it to `READS` (and to the golden corpus,
tests/golden/), and gates what it writes on `current >= NEW`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pinledger.ledger.events import Event, FormatRaised

PLAIN = 1
GROUPED = 2
# Queue resizes came with group records, before any release wrote format 2.
RESIZES = GROUPED
# So did partitions placed on store shards.
PLACEMENTS = GROUPED
MOVES = GROUPED
GUARDED = 3
# Deletes guarded by the state they were selected in, and skipped records (decision 0032).
GUARDED_DELETES = GUARDED
SKIPS = GUARDED
# And queues paused from the catalog (decision 0035).
PAUSES = GUARDED
# Unique jobs: an enqueue with a key (decision 0037).
KEYS = GUARDED
# Cancelled jobs (decision 0036).
CANCELS = GUARDED
# Ticks of periodic jobs (decision 0038).
SCHEDULES = GUARDED
# The formats this release reads, and the newest of them.
READS: frozenset[int] = frozenset({PLAIN, GROUPED, GUARDED})
LATEST = max(READS)

# What a member advertises, in its group membership: "formats=1,2".
_PREFIX = "formats="


class FormatTooOldError(ValueError):
    """What was asked needs a newer ledger format than the cluster writes."""


def advertisement(reads: Iterable[int] = READS) -> str:
    return _PREFIX + ",".join(str(f) for f in sorted(set(reads)))


def advertised_reads(text: str) -> frozenset[int]:
    """The formats a member reads, from its advertisement. A member that advertises
    nothing (or nothing this release understands) runs a release from before formats
    existed: it is held to read format 1 only, so the format is not raised under it."""
    if not text.startswith(_PREFIX):
        return frozenset({PLAIN})
    found = set()
    for item in text.removeprefix(_PREFIX).split(","):
        if item.strip().isdigit():
            found.add(int(item))
    return frozenset(found) or frozenset({PLAIN})


def folded(current: int, events: Iterable[Event]) -> int:
    """The cluster's format after the catalog's `events` (the last raise holds; a raise
    is never undone, so a lower number than `current` is ignored)."""
    for event in events:
        if isinstance(event, FormatRaised) and event.format > current:
            current = event.format
    return current


def unreadable(cluster: int, reads: Iterable[int] = READS) -> str | None:
    """Why a server reading `reads` cannot serve a cluster at format `cluster`, or None
    when it can."""
    readable = set(reads)
    if cluster in readable:
        return None
    return (
        f"the cluster's ledger format is {cluster}, and this release reads formats "
        f"{_listed(readable)}: upgrade this server to a release that reads format {cluster} "
        "(docs/guides/upgrading.md#ledger-formats)"
    )


def blockers(members: Mapping[str, str], target: int) -> list[str]:
    """One line per live member (member id -> its advertisement) that cannot read format
    `target`: what keeps the cluster from being raised to it."""
    found = []
    for member, text in sorted(members.items()):
        reads = advertised_reads(text)
        if target not in reads:
            said = f"reads formats {_listed(reads)}"
            if not text.startswith(_PREFIX):
                said = "advertises no formats (a release before 0.2.0): reads format 1 only"
            found.append(f"{member} {said}")
    return found


def _listed(formats: Iterable[int]) -> str:
    return ", ".join(str(f) for f in sorted(formats))
