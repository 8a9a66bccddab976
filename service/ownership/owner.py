"""Partition ownership: this server's share of the log, through a Kafka consumer group.

Every queue partition (and the catalog) is owned by exactly one live server: Kafka's
group assignment plays the part Helix plays in Pacer. The owner

- projects its partitions into Postgres (the only projector of them while it owns
  them; the offset compare-and-set fences a stale one),
- keeps a `ReadyBuffer` per partition and answers dequeues from memory, appending one
  claim record per partition per dequeue and answering after the broker acknowledged,
- appends the claim timeouts and garbage collection of its partitions.

On assignment a partition is caught up to the end of the log as it was at assignment
before it serves; on revocation it stops serving at once (the rebalance callback only
flips state; Postgres work happens on the owner's own thread).

Threads: one owner thread polls Kafka and projects; Thrift handler threads call
`dequeue`; one lock guards the buffers and the ownership table.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pinledger.ledger.commands import decide_claims, decide_collect, decide_timeouts
from pinledger.ledger.events import (
    Actor,
    Checkpointed,
    Deleted,
    Enqueued,
    Event,
    Failed,
    Retried,
    Succeeded,
)
from pinledger.ledger.log import (
    GroupMember,
    GroupReader,
    Log,
    LogError,
    LogRecord,
    catalog_topic,
    queue_of_topic,
)
from pinledger.ledger.state import FINISHED, Job, JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pg.store import FencedError, PartitionGoneError, Store
from pinledger.projections.projector import CatalogProjector, PartitionProjector, Transition
from pinledger.service.config import Config
from pinledger.service.observability import telemetry
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.dispatcher import ReadyBuffer, take

log = logging.getLogger(__name__)

Key = tuple[str, int]
K = TypeVar("K", str, Key)
M = TypeVar("M")

# Enough records per poll to keep Postgres batches large, few enough that a claim
# waits at most one batch behind a backlog.
_POLL_RECORDS = 2000
_TIMEOUT_EVERY_S = 1.0
_MEMBERS_EVERY_S = 2.0
# How long a queue topic may be owned by no server before the group is asked to
# rebalance: longer than a normal rebalance, short enough that nobody waits long.
_UNOWNED_GRACE_S = 3.0
# How long an owned partition may have records it does not project, without progress,
# before the group is asked to rebalance (which resets the consumer's fetch state: seen
# once in a test run, a partition re-seeked after an eager rebalance was not fetched
# until the next rebalance).
_STALL_GRACE_S = 4.0
# How long one pass of the owner loop may take before the members thread logs where it
# is stuck: a loop that does not poll cannot heartbeat its way back into the group.
_LOOP_STALL_S = 10.0
# How long a queue this server created stays subscribed before the catalog lists it
# (the catalog's owner projects the creation; normally well under a second).
_CREATED_GRACE_S = 30.0


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Owned:
    """One partition this server owns."""

    queue: str
    topic: str
    partition: int
    projector: PartitionProjector
    buffer: ReadyBuffer
    # The partition serves once its projection has reached this offset.
    target: int
    serving: bool = False
    # The enqueue's W3C traceparent of each unfinished job that had one: handed to the
    # worker with the job and linked from claim, timeout and ack spans. Only jobs
    # enqueued while this server owned the partition (the projection has the rest).
    traceparents: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A job handed to a dequeue, with the partition it lives in."""

    partition: int
    job: Job
    traceparent: str | None = None


@dataclass
class _Pending:
    """Rebalance news from the consumer's callback thread, for the owner thread."""

    revoked: list[Key] = field(default_factory=list)
    assigned: list[Key] = field(default_factory=list)


class Owner:
    def __init__(
        self,
        config: Config,
        store: Store,
        kafka: Log,
        writer: LedgerWriter,
        metrics: Metrics,
        on_catalog_change: Callable[[], None] = lambda: None,
        on_members_change: Callable[[int], None] = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.store = store
        self.kafka = kafka
        self.writer = writer
        self.metrics = metrics
        self.ledger_metrics = LedgerMetrics(metrics)
        self.on_catalog_change = on_catalog_change
        self.on_members_change = on_members_change
        self.prefix = config.topic_prefix
        self.group = f"{self.prefix}owners"
        self.member_id = f"pinledger@{config.address}"
        self.actor = Actor(source="pinledger:owner", server=config.server_id)
        self.lock = threading.Lock()
        self.owned: dict[Key, Owned] = {}
        self.catalog: CatalogProjector | None = None
        self.members: list[GroupMember] = []
        self._pending = _Pending()
        self._pending_lock = threading.Lock()
        self._claims = itertools.count(1)
        self._started_ms = now_ms()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="owner", daemon=True)
        self._members_thread = threading.Thread(
            target=self._watch_members, name="owner-members", daemon=True
        )
        self._reader: GroupReader | None = None
        self.alive = False
        self._last_timeout_check = 0.0
        self._last_gc = time.monotonic()
        # Queue topics owned by no member, and since when (members thread); the owner
        # thread asks the group to rebalance when `_rejoin` is set.
        self._unowned_since: dict[str, tuple[int, float]] = {}
        self._lagging_since: dict[Key, tuple[int, float]] = {}
        self._rejoin = threading.Event()
        # When the owner loop last completed a pass (monotonic), and whether its stall
        # has been reported.
        self._loop_at = time.monotonic()
        self._loop_stall_reported = False
        # The queues to own partitions of: the catalog's, plus those this server just
        # created (name -> until when), which the catalog may not list yet.
        self._queues: set[str] = set()
        self._created: dict[str, float] = {}
        self._queues_lock = threading.Lock()
        self._subscribed: set[str] = set()
        self._clock = clock

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        self._subscribed = self.wanted_topics()
        self._reader = self.kafka.group_reader(
            self.group,
            self._subscribed,
            self.member_id,
            self._revoked,
            self._assigned,
            self.config.session_timeout_ms,
        )
        self.alive = True
        self._thread.start()
        self._members_thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._members_thread.join(timeout=5)
        if self._reader is not None:
            self._reader.close()  # leaves the group: the others take over at once

    # -- which topics to own ------------------------------------------------------------

    def set_queues(self, names: Iterable[str]) -> None:
        """The queues the catalog lists (the queue directory calls this when they
        change); the owner thread subscribes to their topics."""
        with self._queues_lock:
            self._queues = set(names)
            for name in self._queues & self._created.keys():
                del self._created[name]

    def add_queue(self, name: str) -> None:
        """A queue this server has just created: own its partitions now, before the
        catalog projection lists it."""
        with self._queues_lock:
            self._created[name] = self._clock() + _CREATED_GRACE_S

    def wanted_topics(self) -> set[str]:
        with self._queues_lock:
            now = self._clock()
            self._created = {q: until for q, until in self._created.items() if until > now}
            queues = self._queues | self._created.keys()
        return {catalog_topic(self.prefix)} | {self.writer.topic(q) for q in queues}

    def _resubscribe(self) -> None:
        assert self._reader is not None
        wanted = self.wanted_topics()
        if wanted != self._subscribed:
            self._reader.subscribe(wanted)
            self._subscribed = wanted

    # -- rebalance callbacks (consumer I/O thread: no blocking work) ----------------

    def _revoked(self, keys: list[Key]) -> None:
        with self.lock:
            for key in keys:
                owned = self.owned.get(key)
                if owned is not None:
                    owned.serving = False
        with self._pending_lock:
            self._pending.revoked.extend(keys)

    def _assigned(self, keys: list[Key]) -> None:
        with self._pending_lock:
            self._pending.assigned.extend(keys)

    # -- the owner thread ---------------------------------------------------------------

    def _run(self) -> None:
        assert self._reader is not None
        while not self._stop.is_set():
            try:
                self._resubscribe()
                if self._rejoin.is_set():
                    self._rejoin.clear()
                    self._reader.request_rejoin()
                records = self._reader.poll(_POLL_RECORDS, 200)
                self._rebalance()
                self._project(records)
                self._promote()
                self._duties()
                self._loop_at = time.monotonic()
            except Exception:
                # The owner must outlive a broken batch: log it, drop what it owns (so
                # the state is reloaded from Postgres) and carry on.
                log.exception("owner loop failed; reloading owned partitions")
                self._reload_all()
                time.sleep(0.5)
        self.alive = False

    def _rebalance(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, _Pending()
        if not pending.assigned:
            # Revocation alone (the first half of an eager rebalance) only stops serving,
            # which the callback did; the buffers wait for the new assignment.
            return
        assigned = set(pending.assigned)
        for key in list(self.owned):
            if key not in assigned:
                self._drop(key)
        catalog = (catalog_topic(self.prefix), 0)
        if catalog not in assigned:
            self.catalog = None
        keys = [key for key in pending.assigned if key != catalog]
        stored = self.store.offsets(keys)
        ends = self._end_offsets(keys)
        for key in keys:
            self._adopt(key, stored.get(key), ends.get(key, 0))
        if catalog in assigned:
            self._adopt_catalog()
        self.metrics.set_gauge("pinledger_owned_partitions", float(len(self.owned)))

    def _drop(self, key: Key) -> None:
        with self.lock:
            owned = self.owned.pop(key, None)
        if owned is not None:
            self.ledger_metrics.forget(owned.queue, owned.partition)

    def _adopt_catalog(self) -> None:
        assert self._reader is not None
        self.catalog = CatalogProjector(self.store, self.prefix)
        self._reader.seek(self.catalog.topic, 0, self.catalog.next_offset)

    def _adopt(self, key: Key, stored: int | None, end: int) -> None:
        """Own a partition: keep the buffer when it was ours and nobody projected it
        since (a rebalance that handed it straight back), else load it from Postgres.
        It serves once projected up to `end`, the log's end at assignment."""
        assert self._reader is not None
        topic, partition = key
        queue = queue_of_topic(self.prefix, topic)
        if queue is None:
            return
        current = self.owned.get(key)
        if current is not None and current.projector.next_offset == stored:
            with self.lock:
                current.target = end
                current.serving = current.projector.next_offset >= end
            self._reader.seek(topic, partition, current.projector.next_offset)
            return
        buffer = ReadyBuffer(self.config.max_priority)
        projector = PartitionProjector(
            self.store,
            queue,
            topic,
            partition,
            listener=self._listener(key),
            observer=self._observer(key, queue, partition),
        )
        unfinished = (JobState.PENDING, JobState.IN_PROGRESS)
        projector.cache = self.store.partition_jobs(queue, partition, unfinished)
        buffer.load(projector.cache.values())
        owned = Owned(queue, topic, partition, projector, buffer, target=end)
        # Jobs enqueued under another owner keep their trace context here too.
        owned.traceparents = self.store.partition_traceparents(queue, partition, unfinished)
        with self.lock:
            self.owned[key] = owned
        self._reader.seek(topic, partition, projector.next_offset)
        log.info(
            "owning %s[%d] from offset %d (%d unfinished jobs; serving after offset %d)",
            topic,
            partition,
            projector.next_offset,
            len(buffer),
            end,
        )

    def _end_offsets(self, keys: Sequence[Key]) -> dict[Key, int]:
        try:
            return self.kafka.end_offsets(keys)
        except LogError as exc:
            log.warning("cannot read end offsets (%s): serving what Postgres has", exc)
            return {}

    def _listener(self, key: Key) -> Callable[[dict[int, Job | None], set[int]], None]:
        def update(touched: dict[int, Job | None], claimed: set[int]) -> None:
            with self.lock:
                owned = self.owned.get(key)
                if owned is not None:
                    owned.buffer.update(touched, claimed)

        return update

    def _observer(
        self, key: Key, queue: str, partition: int
    ) -> Callable[[Sequence[Transition]], None]:
        def observe(transitions: Sequence[Transition]) -> None:
            self.ledger_metrics.observe(queue, partition, transitions)
            owned = self.owned.get(key)
            if owned is None:
                return
            if telemetry.active():
                _apply_spans(queue, partition, transitions, owned.traceparents)
            traceparents = owned.traceparents
            with self.lock:  # dequeues read them under the lock
                for t in transitions:
                    if t.after is None or t.after.state in FINISHED:
                        traceparents.pop(t.local_id, None)
                    elif t.traceparent and isinstance(t.event, Enqueued) and t.verdict.applied:
                        traceparents[t.local_id] = t.traceparent

        return observe

    def _project(self, records: Sequence[LogRecord]) -> None:
        by_key: dict[Key, list[LogRecord]] = {}
        for record in records:
            by_key.setdefault((record.topic, record.partition), []).append(record)
        catalog_key = (catalog_topic(self.prefix), 0)
        for key, batch in by_key.items():
            batch.sort(key=lambda r: r.offset)
            try:
                if key == catalog_key:
                    if self.catalog is not None and self.catalog.apply(batch):
                        self.on_catalog_change()
                    continue
                owned = self.owned.get(key)
                if owned is not None:
                    owned.projector.apply(batch)
            except PartitionGoneError as exc:
                # The rebalance that follows the topic's deletion revokes it for good.
                log.info("%s; no longer owning it", exc)
                self._drop(key)
            except FencedError as exc:
                log.warning("%s; reloading it from Postgres", exc)
                if key == catalog_key:
                    self._adopt_catalog()
                    continue
                self._drop(key)
                if self._still_assigned(key):
                    self._adopt(key, None, self._end_offsets([key]).get(key, 0))

    def _still_assigned(self, key: Key) -> bool:
        assert self._reader is not None
        return key in self._reader.assignment()

    def _promote(self) -> None:
        """Partitions whose projection caught up start serving."""
        with self.lock:
            for owned in self.owned.values():
                if not owned.serving and owned.projector.next_offset >= owned.target:
                    owned.serving = True
                    log.info("serving %s[%d]", owned.topic, owned.partition)

    def _reload_all(self) -> None:
        with self.lock:
            self.owned.clear()
        self.catalog = None
        if self._reader is None:
            return
        try:
            with self._pending_lock:
                self._pending.assigned = list(self._reader.assignment())
            self._rebalance()
        except Exception:
            log.exception("reloading owned partitions failed; retrying on the next rebalance")

    # -- duties: claim timeouts and garbage collection --------------------------------

    def _duties(self) -> None:
        clock = time.monotonic()
        if clock - self._last_timeout_check >= _TIMEOUT_EVERY_S:
            self._last_timeout_check = clock
            self.expire_claims(now_ms())
        if clock - self._last_gc >= self.config.gc_interval_s:
            self._last_gc = clock
            self.collect(now_ms())

    def expire_claims(self, now: int) -> int:
        """Append timeouts for claims not renewed within the claim timeout."""
        timeout_ms = int(self.config.claim_timeout_s * 1000)
        batches: list[tuple[Owned, list[Job]]] = []
        with self.lock:
            for owned in self.owned.values():
                if owned.serving:
                    expired = owned.buffer.expired_claims(now, timeout_ms)
                    if expired:
                        batches.append((owned, expired))
        appends = [
            (owned.queue, owned.partition, decide_timeouts(jobs, now, timeout_ms))
            for owned, jobs in batches
        ]
        if not appends:
            return 0
        span = None
        if telemetry.active():
            span = telemetry.start_job_span(
                "pinledger timeout",
                (owned.traceparents.get(job.local_id) for owned, jobs in batches for job in jobs),
                {"pinledger.jobs": sum(len(jobs) for _, jobs in batches)},
                root=True,
            )
        try:
            self.writer.append_many(
                appends,
                now,
                self.actor,
                None if span is None else telemetry.format_traceparent(span.get_span_context()),
            )
        except LogError:
            with self.lock:
                for owned, jobs in batches:
                    owned.buffer.forget_timeouts(jobs)
            raise
        finally:
            if span is not None:
                span.end()
        count = 0
        for queue, _, events in appends:
            self.metrics.count("pinledger_jobs_total", len(events), queue=queue, action="timeout")
            count += len(events)
        return count

    def collect(self, now: int, limit: int = 5000) -> int:
        """Append Collected for finished jobs past their TTL in owned partitions."""
        succeeded_ttl = int(self.config.succeeded_ttl_s * 1000)
        failed_ttl = int(self.config.failed_ttl_s * 1000)
        with self.lock:
            serving = [o for o in self.owned.values() if o.serving]
        appends: list[tuple[str, int, Sequence[Event]]] = []
        for owned in serving:
            jobs = self.store.expired(
                owned.queue, owned.partition, now - succeeded_ttl, now - failed_ttl, limit
            )
            collected = decide_collect(jobs, now, succeeded_ttl, failed_ttl)
            if collected:
                appends.append((owned.queue, owned.partition, collected))
        if appends:
            self.writer.append_many(appends, now, self.actor)
        for queue, _, events in appends:
            self.metrics.count("pinledger_jobs_total", len(events), queue=queue, action="gc")
        return sum(len(events) for _, _, events in appends)

    # -- membership (for forwarding and shared rate limits) ---------------------------

    def _watch_members(self) -> None:
        while not self._stop.wait(_MEMBERS_EVERY_S):
            self.refresh_members()

    def refresh_members(self) -> None:
        try:
            members = self.kafka.group_members(self.group)
        except LogError as exc:
            log.warning("cannot list the live servers: %s", exc)
            return
        changed = len(members) != len(self.members)
        self.members = members
        if changed:
            self.on_members_change(len(members))
        self._check_unowned(members)
        self._check_lag()
        self._check_loop()
        try:
            self.kafka.forget_deleted_topics()
        except LogError as exc:
            log.warning("cannot check which topics were deleted: %s", exc)

    def _check_unowned(self, members: Sequence[GroupMember]) -> None:
        """Ask for a rebalance when a queue topic stays owned by nobody (see
        KafkaGroupReader.request_rejoin): its jobs could be enqueued but never served.
        A group described with no members counts too: this server is alive, so its
        consumer has dropped out of the group (seen in CI: two minutes with no owner)."""
        queue_topics = self.wanted_topics() - {catalog_topic(self.prefix)}
        try:
            topics = self.kafka.existing(queue_topics)  # not a queue being deleted
        except LogError as exc:
            log.warning("cannot check ownership: %s", exc)
            return
        self._unowned_since, stuck = stalled(
            self._unowned_since,
            dict.fromkeys(unowned_topics(topics, members), 0),
            time.monotonic(),
            _UNOWNED_GRACE_S,
        )
        if stuck:
            log.warning(
                "no server has owned %s for %.0f s (%d member(s) in group %s): asking the "
                "group to rebalance",
                ", ".join(sorted(stuck)),
                _UNOWNED_GRACE_S,
                len(members),
                self.group,
            )
            self._rejoin.set()

    def _check_loop(self) -> None:
        """Log where the owner loop is stuck when one pass takes too long (once per
        stall): while it does not poll, its partitions are neither projected nor
        rebalanced."""
        stuck_for = time.monotonic() - self._loop_at
        if stuck_for < _LOOP_STALL_S:
            self._loop_stall_reported = False
            return
        if self._loop_stall_reported or not self._thread.is_alive():
            return
        self._loop_stall_reported = True
        frame = sys._current_frames().get(self._thread.ident or -1)
        where = "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"
        log.warning(
            "the owner loop has not completed a pass for %.0f s; it is at:\n%s", stuck_for, where
        )

    def _check_lag(self) -> None:
        """Ask for a rebalance when an owned partition has records it has not projected
        and makes no progress: its jobs would wait unseen."""
        with self.lock:
            projected = {key: o.projector.next_offset for key, o in self.owned.items()}
        ends = self._end_offsets(list(projected)) if projected else {}
        lagging = {k: offset for k, offset in projected.items() if ends.get(k, 0) > offset}
        self._lagging_since, stuck = stalled(
            self._lagging_since, lagging, time.monotonic(), _STALL_GRACE_S
        )
        if stuck:
            log.warning(
                "%s: records not fetched for %.0f s; asking the group to rebalance",
                ", ".join(f"{topic}[{partition}]" for topic, partition in stuck),
                _STALL_GRACE_S,
            )
            self._rejoin.set()

    def serves_all(self, queue: str, partitions: int) -> bool:
        """Whether every partition of `queue` is owned by a live server, and those this
        server owns are serving: what a new queue needs before its jobs can be served."""
        topic = self.writer.topic(queue)
        members = self.kafka.group_members(self.group)
        assigned = {(t, p, member.member_id) for member in members for t, p in member.partitions}
        if len({p for t, p, _ in assigned if t == topic}) < partitions:
            return False
        mine = [(t, p) for t, p, member in assigned if t == topic and member == self.member_id]
        with self.lock:
            return all(key in self.owned and self.owned[key].serving for key in mine)

    def peers_for(self, queue: str) -> list[str]:
        """Addresses (host:port) of other live servers owning partitions of `queue`."""
        topic = self.writer.topic(queue)
        addresses = []
        for member in self.members:
            if member.member_id == self.member_id or not member.member_id.startswith("pinledger@"):
                continue
            if any(t == topic for t, _ in member.partitions):
                addresses.append(member.member_id.removeprefix("pinledger@"))
        return addresses

    # -- dequeue (Thrift handler threads) -----------------------------------------------

    def new_claim(self, source: str) -> str:
        """A claim descriptor unique to one dequeue call: server, its start time, the
        caller and a counter, as PinLater made them."""
        return f"{self.config.server_id}:{self._started_ms}:{source}:{next(self._claims)}"

    def _serving(self, queue: str, coverage: float) -> list[Owned]:
        parts = [o for o in self.owned.values() if o.queue == queue and o.serving]
        if 0 < coverage < 1 and len(parts) > 1:
            parts = random.sample(parts, max(1, math.ceil(coverage * len(parts))))
        return parts

    def peek(self, queue: str, limit: int, now: int, coverage: float = 1.0) -> list[Claimed]:
        """dryRun: the jobs a dequeue would get, untouched."""
        with self.lock:
            found = [
                (
                    job.priority,
                    job.run_after,
                    Claimed(o.partition, job, o.traceparents.get(job.local_id)),
                )
                for o in self._serving(queue, coverage)
                for job in o.buffer.due(now, limit)
            ]
        found.sort(key=lambda item: (item[0], item[1]))
        return [claimed for _, _, claimed in found[:limit]]

    def dequeue(
        self, queue: str, limit: int, now: int, actor: Actor, coverage: float = 1.0
    ) -> list[Claimed]:
        """Claim up to `limit` due jobs from owned partitions of `queue`: one claim
        record per partition, answered once the broker has them."""
        if limit <= 0:
            return []
        claim = self.new_claim(actor.source)
        with self.lock:
            parts = self._serving(queue, coverage)
            taken = take([o.buffer for o in parts], now, limit)
            contexts = [parts[index].traceparents.get(job.local_id) for index, job in taken]
        if not taken:
            return []
        by_part: dict[int, list[Job]] = {}
        for index, job in taken:
            by_part.setdefault(index, []).append(job)
        appends: list[tuple[str, int, Sequence[Event]]] = [
            (queue, parts[index].partition, decide_claims(jobs, claim, now, limit))
            for index, jobs in by_part.items()
        ]
        span = None
        if telemetry.active():
            # A child of the dequeue's RPC span, linking to each job's enqueue.
            span = telemetry.start_job_span(
                f"pinledger claim {queue}",
                contexts,
                {"pinledger.queue": queue, "pinledger.claim": claim, "pinledger.jobs": len(taken)},
            )
        try:
            self.writer.append_many(
                appends,
                now,
                actor,
                None if span is None else telemetry.format_traceparent(span.get_span_context()),
            )
        except LogError:
            with self.lock:
                for index, jobs in by_part.items():
                    parts[index].buffer.release(job.local_id for job in jobs)
            raise
        finally:
            if span is not None:
                span.end()
        for _, job in taken:
            self.metrics.observe(
                "pinledger_dequeue_delay_seconds", max(0, now - job.run_after) / 1000, queue=queue
            )
        return [
            Claimed(parts[index].partition, job, context)
            for (index, job), context in zip(taken, contexts, strict=True)
        ]


# Events whose application gets a span linking to the jobs' enqueues (claims and
# timeouts have theirs where the owner appends them).
_APPLY_SPAN_EVENTS = (Succeeded, Failed, Checkpointed, Retried, Deleted)


def _apply_spans(
    queue: str, partition: int, transitions: Sequence[Transition], traceparents: dict[int, str]
) -> None:
    """One span per record's trace context for the acks, checkpoints, retries and
    deletes a batch applied: a child of the call that appended them (when it was
    traced), linking to each job's enqueue context, with counts of applied and
    rejected events."""
    groups: dict[str | None, list[Transition]] = {}
    for t in transitions:
        if isinstance(t.event, _APPLY_SPAN_EVENTS):
            groups.setdefault(t.traceparent, []).append(t)
    for parent, group in groups.items():
        attributes: dict[str, int | str] = {
            "pinledger.queue": queue,
            "pinledger.partition": partition,
        }
        for t in group:
            name = f"pinledger.{type(t.event).__name__.lower()}." + (
                "applied" if t.verdict.applied else "rejected"
            )
            attributes[name] = int(attributes.get(name, 0)) + 1
        span = telemetry.start_job_span(
            f"pinledger apply {queue}",
            (traceparents.get(t.local_id) for t in group),
            attributes,
            parent=parent,
            root=True,
        )
        span.end()


def unowned_topics(topics: set[str], members: Sequence[GroupMember]) -> set[str]:
    """Queue topics no member of the group has a partition of; all of them when the
    group has no members."""
    return topics - {topic for member in members for topic, _ in member.partitions}


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
