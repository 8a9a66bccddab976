"""The ownership watchdog (decisions 0006, 0008): asks the owners' group to rebalance
when a partition goes unserved, and logs where the owner loop is stuck.

Every members refresh (2 s, members thread) it checks

- each queue topic this server subscribes to that exists in Kafka against the union of
  the members' assignments: one owned by nobody for `UNOWNED_GRACE_S` makes it ask for
  a rebalance (kafka-python can leave a topic created during a rebalance out of the
  assignment). A group described with no members counts as every queue unowned;
- each partition this server owns, its log end against its projected offset: one with
  unprojected records and no progress for `STALL_GRACE_S` makes it ask too (a partition
  re-seeked after an eager rebalance was once not fetched until the next rebalance);
- the owner loop: a pass taking over `LOOP_STALL_S` gets its stack logged, once.

The first two checks read what the metrics need too, so they export them at no cost of
their own: `pinledger_unowned_partitions` (from the group's assignment and the catalog's
partition counts) and the projection lag (lag.py, from the end offsets).

Asking for a rebalance sets the `rejoin` event; the owner thread calls the reader's
`request_rejoin` before its next poll (kafka-python wants it on the polling thread).

Both stall checks share one pure tracker, `stalled`. The watchdog's own state
(`_unowned_since`, `_lagging_since`, `_loop_stall_reported`) is the members thread's
alone: no lock.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from typing import TypeVar

from pinledger.ledger.clock import Clock
from pinledger.ledger.log import GroupMember, Log, LogError, catalog_topic, queue_topic
from pinledger.projections.store import StoreError
from pinledger.service.observability import catalogue
from pinledger.service.ownership.lag import ProjectionLag
from pinledger.service.ownership.loop import OwnerLoop
from pinledger.service.ownership.partitions import Key, Partitions
from pinledger.service.ownership.topics import OwnedTopics

log = logging.getLogger(__name__)

K = TypeVar("K", str, Key)
M = TypeVar("M")

# How long a queue topic may be owned by no server before the group is asked to
# rebalance: longer than a normal rebalance, short enough that nobody waits long.
UNOWNED_GRACE_S = 3.0
# How long an owned partition may have records it does not project, without progress,
# before the group is asked to rebalance (which resets the consumer's fetch state: seen
# once in a test run, a partition re-seeked after an eager rebalance was not fetched
# until the next rebalance).
STALL_GRACE_S = 4.0
# How long one pass of the owner loop may take before the members thread logs where it
# is stuck: a loop that does not poll cannot heartbeat its way back into the group.
LOOP_STALL_S = 10.0


def unowned_topics(topics: set[str], members: Sequence[GroupMember]) -> set[str]:
    """Queue topics no member of the group has a partition of; all of them when the
    group has no members."""
    return topics - {topic for member in members for topic, _ in member.partitions}


def partly_owned_topics(counts: Mapping[str, int], members: Sequence[GroupMember]) -> set[str]:
    """Queue topics (topic -> the partitions the catalog lists) with a partition no
    member owns: a queue grown live whose new partitions the group has not handed out
    (decision 0030)."""
    owned = {key for member in members for key in member.partitions}
    return {
        topic
        for topic, count in counts.items()
        if any((topic, p) not in owned for p in range(count))
    }


def unowned_partitions(
    counts: Mapping[str, int], members: Sequence[GroupMember], catalog: str
) -> int:
    """Partitions no member owns: of the queue topics (topic -> the partitions the
    catalog lists), and the `catalog` topic's one."""
    owned = {key for member in members for key in member.partitions}
    queues = sum(1 for t, count in counts.items() for p in range(count) if (t, p) not in owned)
    return queues + ((catalog, 0) not in owned)


def stalled(
    since: dict[K, tuple[M, float]], current: dict[K, M], now: float, grace_s: float
) -> tuple[dict[K, tuple[M, float]], list[K]]:
    """Track things that look stuck: `current` maps each suspect to a progress marker
    (a topic still unowned: a constant; a lagging partition: its projected offset).
    Returns (each suspect's marker and since when it has not changed, the suspects
    unchanged for at least `grace_s`). A stuck suspect's clock restarts, so the
    rebalance it causes gets its own grace period."""
    tracked: dict[K, tuple[M, float]] = {}
    for key, marker in current.items():
        previous = since.get(key)
        tracked[key] = previous if previous is not None and previous[0] == marker else (marker, now)
    stuck = sorted((k for k, (_, first) in tracked.items() if now - first >= grace_s), key=str)
    for key in stuck:
        tracked[key] = (tracked[key][0], now)
    return tracked, stuck


class Watchdog:
    def __init__(
        self,
        group: str,
        kafka: Log,
        topics: OwnedTopics,
        partitions: Partitions,
        loop: OwnerLoop,
        rejoin: threading.Event,
        clock: Clock,
    ) -> None:
        self.group = group
        self.kafka = kafka
        self.topics = topics
        self.partitions = partitions
        self.loop = loop
        self.rejoin = rejoin
        self.clock = clock
        # Queue topics owned by no member / owned partitions not progressing, and since
        # when (monotonic).
        self._unowned_since: dict[str, tuple[int, float]] = {}
        self._lagging_since: dict[Key, tuple[int, float]] = {}
        # Whether the owner loop's current stall has been reported.
        self._loop_stall_reported = False
        self.lag = ProjectionLag(partitions.metrics, topics.prefix)

    def check(self, members: Sequence[GroupMember]) -> None:
        """All three checks, after a members refresh."""
        self.check_unowned(members)
        self.check_lag()
        self.check_loop()

    def check_unowned(self, members: Sequence[GroupMember]) -> None:
        """Ask for a rebalance when a queue topic stays owned by nobody (see
        KafkaGroupReader.request_rejoin): its jobs could be enqueued but never served.
        A group described with no members counts too: this server is alive, so its
        consumer has dropped out of the group (seen in CI: two minutes with no owner)."""
        queue_topics = self.topics.queue_topics()
        try:
            topics = self.kafka.existing(queue_topics)  # not a queue being deleted
        except LogError as exc:
            log.warning("cannot check ownership: %s", exc)
            return
        counts = self._partition_counts(topics)
        suspects = unowned_topics(topics, members)
        if members:
            suspects |= partly_owned_topics(counts or {}, members)
        if counts is not None:
            catalog = catalog_topic(self.topics.prefix)
            self.partitions.metrics.set_gauge(
                catalogue.UNOWNED_PARTITIONS, unowned_partitions(counts, members, catalog)
            )
        self._unowned_since, stuck = stalled(
            self._unowned_since,
            dict.fromkeys(suspects, 0),
            self.clock.monotonic(),
            UNOWNED_GRACE_S,
        )
        if stuck:
            log.warning(
                "no server has owned %s (or some of its partitions) for %.0f s (%d member(s) "
                "in group %s): asking the group to rebalance",
                ", ".join(sorted(stuck)),
                UNOWNED_GRACE_S,
                len(members),
                self.group,
            )
            self.rejoin.set()

    def _partition_counts(self, topics: set[str]) -> dict[str, int] | None:
        """The partitions the catalog projection lists for these queue topics (None
        when the store does not answer: the lag check covers a stuck projection)."""
        try:
            rows = self.partitions.store.queues()
        except StoreError:
            return None
        counts = {queue_topic(self.topics.prefix, row.name): row.partitions for row in rows}
        return {topic: count for topic, count in counts.items() if topic in topics}

    def check_lag(self) -> None:
        """Ask for a rebalance when an owned partition has records it has not projected
        and makes no progress: its jobs would wait unseen. The same end offsets measure
        the projection lag of every owned partition, the paused ones (from the record
        they are paused at) and the catalog's."""
        projected = self.partitions.projected()
        measured = {
            **{key: paused.offset for key, paused in self.partitions.pauses.paused.items()},
            **projected,
        }
        catalog = self.partitions.catalog
        if catalog is not None:
            measured[self.partitions.catalog_key] = catalog.next_offset
        ends: dict[Key, int] = {}
        if measured:
            try:
                ends = self.kafka.end_offsets(sorted(measured))
            except LogError as exc:
                # The lag gauges keep their last values until the end can be read.
                log.warning("cannot read end offsets (%s): projection lag not measured", exc)
            else:
                self.lag.update(measured, ends, self.clock.monotonic())
        else:
            self.lag.update({}, {}, self.clock.monotonic())
        lagging = {k: offset for k, offset in projected.items() if ends.get(k, 0) > offset}
        self._lagging_since, stuck = stalled(
            self._lagging_since, lagging, self.clock.monotonic(), STALL_GRACE_S
        )
        if stuck:
            log.warning(
                "%s: records not fetched for %.0f s; asking the group to rebalance",
                ", ".join(f"{topic}[{partition}]" for topic, partition in stuck),
                STALL_GRACE_S,
            )
            self.rejoin.set()

    def check_loop(self) -> None:
        """Log where the owner loop is stuck when one pass takes too long (once per
        stall): while it does not poll, its partitions are neither projected nor
        rebalanced."""
        stuck_for = self.clock.monotonic() - self.loop.loop_at
        if stuck_for < LOOP_STALL_S:
            self._loop_stall_reported = False
            return
        thread = self.loop.thread
        if self._loop_stall_reported or not thread.is_alive():
            return
        self._loop_stall_reported = True
        frame = sys._current_frames().get(thread.ident or -1)
        where = "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"
        log.warning(
            "the owner loop has not completed a pass for %.0f s; it is at:\n%s", stuck_for, where
        )
