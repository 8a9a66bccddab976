"""Partition ownership: this server's share of the log, through a Kafka consumer group.

Every queue partition (and the catalog) is owned by exactly one live server: Kafka's
group assignment plays the part Helix plays in Pacer. The owner

- projects its partitions into Postgres (the only projector of them while it owns
  them; the offset compare-and-set fences a stale one),
- keeps a `ReadyBuffer` per partition (a bounded window of its next ready jobs,
  refilled from Postgres) and answers dequeues from memory, appending one claim record
  per partition per dequeue and answering after the broker acknowledged,
- appends the claim timeouts and garbage collection of its partitions.

`Owner` is the facade the server and the Thrift handler use; the work is in the rooms:

- subscription.py: which topics to subscribe to (the catalog's queues, and those
  created here);
- partitions.py: the owned partitions, adoption and catch-up on assignment,
  projection, revocation (and the rebalance callbacks);
- loop.py: the owner thread and its pass;
- claims.py: dequeue (take from the ready buffers in ready_buffer.py, append claims);
- maintenance/: one module per duty: claim timeouts and garbage collection, appended
  as events, and the timeline's retention (its day partitions made ahead and dropped
  past the history retention, a thread of its own);
- membership.py: the group's live members (forwarding, rate limits, createQueue's wait)
  and the members thread;
- ledger_format.py: the cluster's ledger format, read from the catalog at start (a
  format this release cannot read stops it before it joins) and on each members tick;
- watchdog.py: rebalance requests for unserved partitions, the stuck-loop report;
- spans.py: trace spans of the owner's actions;

Threads: the owner thread (loop.py) polls Kafka, projects and runs maintenance; the
members thread (membership.py) follows the ledger format, lists the group's members
and runs the watchdog; the
retention thread (maintenance/timeline_retention.py) keeps the timeline's partitions; the
queue-gauges thread (maintenance/queue_gauges.py) reads each queue's jobs by state for
/metrics while this server owns the catalog; the consumer's I/O thread calls the
rebalance callbacks; Thrift handler threads call `dequeue`, `peek`, `serves_all`,
`peers_for` and `add_queue`; the queue directory's thread calls `set_queues`.

Locks (two; neither is ever held while taking the other):

- `Partitions.lock` guards the ownership table, each owned partition's serving state,
  ready buffer and trace contexts, and the rebalance news (partitions.py says why one
  lock is enough);
- `Subscription`'s lock guards the queue names to subscribe to (subscription.py).

Events: `stop` ends both threads; `rejoin` carries the watchdog's rebalance request to
the owner thread. Everything else belongs to one thread (each module says which).

Time: every read goes through the injected `Clock` (wall time for events, monotonic
time for intervals and grace periods; sleeps wake on `stop`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from pinledger.ledger import formats
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.events import Actor
from pinledger.ledger.log import GroupMember, GroupReader, Log, LogError, owners_group
from pinledger.ledger.writer import LedgerWriter, Traced
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.store import LedgerStore, QueueRow
from pinledger.service.config import Config
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.claims import Claimed, Claims
from pinledger.service.ownership.live_traces import LiveTraces
from pinledger.service.ownership.loop import OwnerLoop
from pinledger.service.ownership.maintenance.adaptation import Adaptation, DequeueTally
from pinledger.service.ownership.maintenance.claim_timeouts import ClaimTimeouts
from pinledger.service.ownership.maintenance.garbage_collection import Collector
from pinledger.service.ownership.maintenance.ledger_format import ClusterFormat
from pinledger.service.ownership.maintenance.queue_gauges import QueueGauges, QueueGaugesThread
from pinledger.service.ownership.maintenance.queue_sizes import QueueSizes
from pinledger.service.ownership.maintenance.retirement import Retirement
from pinledger.service.ownership.maintenance.schedule import Maintenance
from pinledger.service.ownership.maintenance.timeline_retention import (
    RetentionThread,
    TimelineRetention,
)
from pinledger.service.ownership.maintenance.watchdog import Watchdog, stalled, unowned_topics
from pinledger.service.ownership.membership import (
    Membership,
    MembersThread,
    member_id_of,
    rate_shares,
)
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.subscription import Subscription

log = logging.getLogger(__name__)

__all__ = ["Claimed", "Owned", "Owner", "stalled", "unowned_topics"]


class Owner:
    def __init__(
        self,
        config: Config,
        store: LedgerStore,
        kafka: Log,
        writer: LedgerWriter,
        metrics: Metrics,
        on_catalog_change: Callable[[], None] = lambda: None,
        on_members_change: Callable[[int], None] = lambda _: None,
        clock: Clock = SYSTEM_CLOCK,
        on_unreadable_format: Callable[[str], None] = lambda _: None,
        on_rate_shares: Callable[[Mapping[str, float]], None] = lambda _: None,
    ) -> None:
        """`on_rate_shares`: told, when it changes, the fraction of each queue's
        partitions this server owns (its share of the queue's rate limit)."""
        self.config = config
        self.kafka = kafka
        self.clock = clock
        self.group = owners_group(config.topic_prefix)
        self.member_id = member_id_of(config.address)
        self.writer = writer
        actor = Actor(source="pinledger:owner", server=config.server_id)
        self._stop = threading.Event()
        rejoin = threading.Event()
        self.subscription = Subscription(config.topic_prefix, writer, self.clock)
        self.live_traces = LiveTraces(store, metrics, config.trace_queue, self._stop)
        self.partitions = Partitions(
            config.topic_prefix,
            config.max_priority,
            store,
            kafka,
            metrics,
            LedgerMetrics(metrics),
            on_catalog_change,
            window=config.ready_window,
            live_traces=self.live_traces,
            # The catalog goes into every store shard (decision 0031).
            catalog_stores=(
                (lambda: tuple(store.stores.values())) if isinstance(store, ShardedStore) else None
            ),
            clock=self.clock,
        )
        self.claims = Claims(
            config.server_id, self.clock.now_ms(), self.partitions, writer, metrics
        )
        self.timeouts = ClaimTimeouts(
            self.partitions, writer, metrics, actor, config.claim_timeout_s
        )
        self.collector = Collector(
            self.partitions,
            writer,
            metrics,
            actor,
            config.succeeded_ttl_s,
            config.failed_ttl_s,
        )
        maintenance = Maintenance(self.clock, self.timeouts, self.collector, config.gc_interval_s)
        self.loop = OwnerLoop(
            self.subscription, self.partitions, maintenance, rejoin, self._stop, self.clock
        )
        self.membership = Membership(
            kafka, self.group, self.member_id, self.partitions, on_members_change
        )
        self.watchdog = Watchdog(
            self.group, kafka, self.subscription, self.partitions, self.loop, rejoin, self.clock
        )
        self._members_thread = MembersThread(self.refresh_members, self._stop, self.clock)
        self._retention_thread = RetentionThread(
            TimelineRetention(store, self.clock, config.history_retention_days),
            self._stop,
            self.clock,
        )
        # Each queue's jobs by state for /metrics, read by the catalog's owner alone.
        self._queue_gauges: QueueGaugesThread | None = None
        if config.queue_metrics_interval_s > 0:
            gauges = QueueGauges(
                store,
                metrics,
                lambda: self.partitions.catalog is not None,
                self.clock,
                config.max_priority,
                config.queue_metrics_cap,
            )
            self._queue_gauges = QueueGaugesThread(
                gauges, self._stop, self.clock, config.queue_metrics_interval_s
            )
        self._reader: GroupReader | None = None
        # Resizes the queues whose `partitions` the queue config changes (the server
        # sets it; queue_sizes.py).
        self.queue_sizes: QueueSizes | None = None
        # The members tick's duties failing now, by what they do: the message logged.
        self._duty_failures: dict[str, str] = {}
        # Retires a queue's drained partitions, on the catalog's owner (the server sets
        # it; retirement.py).
        self.retirement: Retirement | None = None
        # The dequeue calls this server answers, for the adaptive partitions
        # (adaptation.py), which the server sets.
        self.dequeue_tally = DequeueTally(metrics)
        self.adaptation: Adaptation | None = None
        self.metrics = metrics
        self.on_rate_shares = on_rate_shares
        self._rate_shares: dict[str, float] | None = None
        self.format = ClusterFormat(
            kafka, config.topic_prefix, writer, metrics, on_unreadable_format
        )

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Join the owners' group and start the owner's threads; raises
        UnreadableFormatError, before joining, when the cluster writes a ledger format
        this release cannot read."""
        self.format.start()
        self._reader = self.kafka.group_reader(
            self.group,
            self.subscription.initial(),
            self.member_id,
            self.partitions.revoked,
            self.partitions.assigned,
            self.config.session_timeout_ms,
            advertised=formats.advertisement(),
        )
        self.partitions.attach(self._reader)
        self.loop.start(self._reader)
        self._members_thread.thread.start()
        self._retention_thread.thread.start()
        self.live_traces.thread.start()
        if self._queue_gauges is not None:
            self._queue_gauges.thread.start()

    def stop(self) -> None:
        started = time.monotonic()
        self._stop.set()
        self.live_traces.wake()
        self.loop.thread.join(timeout=10)
        self._members_thread.thread.join(timeout=5)
        self._retention_thread.thread.join(timeout=5)
        self.live_traces.thread.join(timeout=5)
        if self._queue_gauges is not None:
            self._queue_gauges.thread.join(timeout=5)
        self.live_traces.drain()  # the spans of the last acks this server applied
        # Serving off, and the claims in flight in the log, before leaving: the next
        # owner serves once it has projected up to the log's end it reads when assigned,
        # so a claim appended after that would be a job it hands out a second time.
        # The claim appends in flight began before this stop, so each ends within
        # claim_append_s of its start: the wait counts from there (Config.stop_s).
        landing = max(0.0, self.config.claim_append_s - (time.monotonic() - started))
        if not self.claims.close(landing):
            log.warning(
                "leaving the owners' group with a claim append still unanswered after %g s "
                "(Kafka slow or unreachable): if it lands after the next owner has taken "
                "over, its jobs may be handed out twice",
                self.config.claim_append_s,
            )
        if self._reader is not None:
            self._reader.close()  # leaves the group: the others take over at once

    @property
    def alive(self) -> bool:
        """Whether the owner thread runs (the server's health check)."""
        return self.loop.alive

    # -- which topics to own ------------------------------------------------------------

    def set_queues(self, names: Iterable[str]) -> None:
        """The queues the catalog lists (the queue directory calls this when they
        change); the owner thread subscribes to their topics."""
        self.subscription.set_queues(names)

    def set_rows(self, rows: Iterable[QueueRow]) -> None:
        """Every queue's row as the catalog projection has it (the queue directory
        calls this on each read): the owner leaves their retired partitions out of its
        work, its dequeues and its forwarding."""
        rows = list(rows)
        self.partitions.set_retired(
            {row.name: row.active for row in rows if row.active < row.partitions}
        )
        for row in rows:
            states = Counter(row.state_of(p) for p in range(row.partitions))
            for state in ("serving", "draining", "retired"):
                self.metrics.set_gauge(
                    "pinledger_queue_partitions", float(states[state]), queue=row.name, state=state
                )

    def add_queue(self, name: str) -> None:
        """A queue this server has just created: own its partitions now, before the
        catalog projection lists it."""
        self.subscription.add_queue(name)

    def wanted_topics(self) -> set[str]:
        return self.subscription.wanted_topics()

    # -- membership (for forwarding and shared rate limits) ---------------------------

    @property
    def members(self) -> list[GroupMember]:
        return self.membership.members

    def refresh_members(self) -> None:
        """The members thread's tick: follow the cluster's ledger format, resize the
        queues the queue config asks to (on the catalog's owner), list the members, run
        the watchdog, and let the producer forget deleted topics (decision 0007:
        kafka-python's producer would otherwise re-request their metadata forever)."""
        try:
            self.format.refresh()
        except LogError as exc:
            log.warning("cannot read the cluster's ledger format from the catalog: %s", exc)
        if self.queue_sizes is not None:
            self._duty("checking the queue config's partitions", self.queue_sizes.check)
        if self.retirement is not None:
            self._duty("checking for drained partitions to retire", self.retirement.check)
        if self.adaptation is not None:
            self._duty("adapting the queues' partitions", self.adaptation.check)
        members = self.membership.refresh()
        if members is None:
            return
        self._share_rates(members)
        self.watchdog.check(members)
        try:
            self.kafka.forget_deleted_topics()
        except LogError as exc:
            log.warning("cannot check which topics were deleted: %s", exc)

    @property
    def rate_shares(self) -> Mapping[str, float] | None:
        """This server's share of each queue's partitions, as last told to
        `on_rate_shares` (None before the first members tick that saw them)."""
        return self._rate_shares

    def _share_rates(self, members: Sequence[GroupMember]) -> None:
        """Tell `on_rate_shares` this server's share of each queue's partitions when it
        changed; a group between generations (no partition assigned) changes nothing."""
        if not any(member.partitions for member in members):
            return
        shares = rate_shares(
            members, self.member_id, self.config.topic_prefix, self.partitions.retired_from
        )
        if shares != self._rate_shares:
            self._rate_shares = shares
            self.on_rate_shares(shares)

    def _duty(self, what: str, check: Callable[[], object]) -> None:
        """One duty of the members tick; the tick's other duties run whatever happens.
        A failure is logged once while it lasts (a store shard down fails it every tick),
        and its end once."""
        try:
            check()
        except Exception as exc:
            said = f"{what} failed: {exc}"
            if self._duty_failures.get(what) != said:
                log.warning("%s; trying again every tick", said)
            self._duty_failures[what] = said
        else:
            if self._duty_failures.pop(what, None) is not None:
                log.info("%s works again", what)

    @property
    def unavailable(self) -> str | None:
        """Why this server's partitions are not served now (the store or the log failed
        and the reload has not worked yet), or None."""
        if not self.partitions.reload_pending:
            return None
        exc = self.partitions.reload_error
        return "reloading its partitions" if exc is None else f"{type(exc).__name__}: {exc}"

    def paused_partitions(self) -> dict[str, str]:
        """The partitions paused at a record their store refuses or no release decodes
        ("queue[partition]" -> the offset, why, and the command that skips it): the
        server's other partitions serve, so /ready names them and stays ready (decision
        0032)."""
        return self.partitions.paused()

    @property
    def members_thread_alive(self) -> bool:
        return self._members_thread.thread.is_alive()

    @property
    def members_progressed_at(self) -> float:
        """Monotonic time the members thread last finished a tick."""
        return self._members_thread.last_tick_at

    def serves_all(self, queue: str, partitions: int) -> bool:
        """Whether every partition of `queue` is owned by a live server, and those this
        server owns are serving: what a new queue needs before its jobs can be served."""
        return self.membership.serves_all(self.writer.topic(queue), partitions)

    def peers_for(self, queue: str) -> list[str]:
        """Addresses (host:port) of other live servers owning partitions of `queue`."""
        return self.membership.peers_for(
            self.writer.topic(queue), self.partitions.retired_from(queue)
        )

    # -- dequeue (Thrift handler threads) and maintenance -------------------------------

    def note_dequeue(self, queue: str, jobs: int) -> None:
        """A dequeue call this server answered (for the adaptive partitions' measure of
        empty answers)."""
        self.dequeue_tally.note(queue, jobs)

    def new_claim(self, source: str) -> str:
        return self.claims.new_claim(source)

    def peek(self, queue: str, limit: int, now: int, coverage: float = 1.0) -> list[Claimed]:
        """dryRun: the jobs a dequeue would get, untouched."""
        return self.claims.peek(queue, limit, now, coverage)

    def dequeue(
        self,
        queue: str,
        limit: int,
        now: int,
        actor: Actor,
        coverage: float = 1.0,
        alongside: Traced | None = None,
    ) -> list[Claimed]:
        """Claim up to `limit` due jobs from owned partitions of `queue`: one claim
        record per partition, answered once the broker has them (with `alongside`, the
        call's acks, in the same round trip)."""
        return self.claims.dequeue(queue, limit, now, actor, coverage, alongside)
