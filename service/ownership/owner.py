"""Partition ownership: this server's share of the log, through a Kafka consumer group.

Every queue partition (and the catalog) is owned by exactly one live server: Kafka's
group assignment plays the part Helix plays in Pacer. The owner

- projects its partitions into Postgres (the only projector of them while it owns
  them; the offset compare-and-set fences a stale one),
- keeps a `ReadyBuffer` per partition (a bounded window of its next ready jobs,
  refilled from Postgres) and answers dequeues from memory, appending one claim record
  per partition per dequeue and answering after the broker acknowledged,
- appends the claim timeouts and garbage collection of its partitions, and runs the
  server's other periodic duties (maintenance/).

`Owner` is the facade the server and the Thrift handler use; the work is in the rooms:

- topics.py: which topics to subscribe to (the catalog's queues, and those
  created here);
- partitions.py: the owned partitions, adoption and catch-up on assignment,
  projection, revocation (and the rebalance callbacks);
- loop.py: the owner thread and its pass;
- claims.py: dequeue (take from the ready buffers in ready_buffer.py, append claims);
- maintenance/: every periodic duty, one module each, and the one scheduler that runs
  them (duties.py builds them and lists their lanes): claim timeouts and garbage
  collection, the ledger format (read at start too: a format this release cannot read
  stops the server before it joins), the queue config's resizes, retirement,
  adaptation, the members tick and its watchdog, the timeline's retention, the queue
  gauges;
- peers.py: the group's live members (forwarding, rate limits, createQueue's wait);
- spans.py: trace spans of the owner's actions;

Threads: the owner thread (loop.py) polls Kafka, projects and runs the owner lane's
duties (claim timeouts, garbage collection); the scheduler's other lanes run the other
duties on threads of their own (owner-members: the ledger format, resizes, retirement,
adaptation, the members list and the watchdog; timeline-retention; queue-gauges); the
consumer's I/O thread calls the rebalance callbacks; Thrift handler threads call
`dequeue`, `peek`, `serves_all`, `peers_for` and `add_queue`; the queue directory's
thread calls `set_queues`.

Locks (two; neither is ever held while taking the other):

- `Partitions.lock` guards the ownership table, each owned partition's serving state,
  ready buffer and trace contexts, and the rebalance news (partitions.py says why one
  lock is enough);
- `OwnedTopics`'s lock guards the queue names to subscribe to (topics.py).

Events: `stop` ends the owner thread and the scheduler's; `rejoin` carries the
watchdog's rebalance request to the owner thread. Everything else belongs to one thread
(each module says which).

Time: every read goes through the injected `Clock` (wall time for events, monotonic
time for intervals and grace periods; sleeps wake on `stop`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from pinledger.ledger import formats
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.events import Actor
from pinledger.ledger.log import GroupMember, GroupReader, Log, owners_group
from pinledger.ledger.writer import LedgerWriter, Traced
from pinledger.projections.store import LedgerStore, QueueRow
from pinledger.service.config import Config
from pinledger.service.observability import catalogue
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.claims import Claims, DequeuedJob
from pinledger.service.ownership.lease import Lease
from pinledger.service.ownership.live_traces import LiveTraces
from pinledger.service.ownership.liveness import (
    Endpoint,
    LivenessListener,
    LivenessWatch,
    advertisement,
    new_token,
)
from pinledger.service.ownership.loop import OwnerLoop
from pinledger.service.ownership.maintenance.adaptation import DequeueTally
from pinledger.service.ownership.maintenance.duties import Duties, Sources, build_duties
from pinledger.service.ownership.maintenance.scheduler import Scheduler
from pinledger.service.ownership.maintenance.watchdog import stalled, unowned_topics
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.peers import Peers, member_id_of
from pinledger.service.ownership.topics import OwnedTopics
from pinledger.service.queue_config import QueueConfig

log = logging.getLogger(__name__)

__all__ = ["DequeuedJob", "Owned", "Owner", "stalled", "unowned_topics"]


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
        queue_config: Callable[[], QueueConfig] = QueueConfig,
        queue_rows: Callable[[], Iterable[QueueRow]] = tuple,
    ) -> None:
        """`on_rate_shares`: told, when it changes, the fraction of each queue's
        partitions this server owns (its share of the queue's rate limit).
        `queue_config`, `queue_rows`: the queue config as the server last read its file,
        and the catalog's queues as its queue directory last read them (what the
        resizes, retirement and adaptation act on)."""
        self.config = config
        self.kafka = kafka
        self.clock = clock
        self.group = owners_group(config.topic_prefix)
        self.member_id = member_id_of(config.address)
        self.writer = writer
        self._stop = threading.Event()
        rejoin = threading.Event()
        self.topics = OwnedTopics(config.topic_prefix, writer, self.clock)
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
            clock=self.clock,
        )
        self.lease = Lease(config.session_timeout_ms / 1000, self.clock.monotonic, metrics)
        self.claims = Claims(
            config.server_id,
            self.clock.now_ms(),
            self.partitions,
            writer,
            metrics,
            self.lease.held,
        )
        self.loop = OwnerLoop(
            self.topics,
            self.partitions,
            lambda: self.scheduler.lane("owner").run_due(),
            rejoin,
            self._stop,
            self.clock,
        )
        self.peers = Peers(kafka, self.group, self.member_id, self.partitions, on_members_change)
        # The dequeue calls this server answers, for the adaptive partitions
        # (maintenance/adaptation.py).
        self.dequeue_tally = DequeueTally(metrics)
        self.duties: Duties = build_duties(
            config=config,
            store=store,
            kafka=kafka,
            writer=writer,
            metrics=metrics,
            clock=self.clock,
            partitions=self.partitions,
            topics=self.topics,
            peers=self.peers,
            loop=self.loop,
            rejoin=rejoin,
            tally=self.dequeue_tally,
            sources=Sources(queue_config, queue_rows),
            on_rate_shares=on_rate_shares,
            on_unreadable_format=on_unreadable_format,
        )
        self.scheduler: Scheduler = self.duties.scheduler(self.clock, self._stop)
        self.format = self.duties.ledger_format
        self._reader: GroupReader | None = None
        self.metrics = metrics
        # Exported from the start: an alert on their increase needs the series.
        for counter in (catalogue.PEERS_REMOVED_TOTAL, catalogue.OWNER_LEASE_LAPSES_TOTAL):
            metrics.count(counter, 0)
        # The liveness listener and watch (liveness.py), made at start.
        self._listener: LivenessListener | None = None
        self._watch: LivenessWatch | None = None

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Join the owners' group and start the owner's threads; raises
        UnreadableFormatError, before joining, when the cluster writes a ledger format
        this release cannot read."""
        self.format.start()
        advertised = formats.advertisement()
        if self.config.liveness:
            advertised += self._start_liveness()
        self._reader = self.kafka.group_reader(
            self.group,
            self.topics.initial(),
            self.member_id,
            self.partitions.revoked,
            self.partitions.assigned,
            self.config.session_timeout_ms,
            advertised=advertised,
        )
        self.partitions.attach(self._reader)
        self.lease.attach(self._reader.confirmed_at)
        self.loop.start(self._reader)
        self.scheduler.start()
        self.live_traces.thread.start()
        if self._watch is not None:
            self._watch.thread.start()

    def stop(self) -> None:
        started = time.monotonic()
        self._stop.set()
        if self._reader is not None:
            self._reader.wake()  # the owner thread's poll ends now, not at its timeout
        self.live_traces.wake()
        self.loop.thread.join(timeout=10)
        self.scheduler.join(timeout_s=5)
        self.live_traces.thread.join(timeout=5)
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
        if self._listener is not None:
            # Only now, out of the group: the others, seeing it close, rejoin at once
            # (liveness.py), and never take a server still owning partitions for dead.
            self._listener.close()
        if self._watch is not None:
            self._watch.thread.join(timeout=2)

    def _start_liveness(self) -> str:
        """Listen on the liveness port and make the watch of the others (started once
        this server has joined); what to advertise of it."""
        token = new_token()
        self._listener = LivenessListener(self.config.host, self.config.liveness_port, token)
        self._listener.start()
        self._watch = LivenessWatch(
            token,
            lambda: self.peers.members,
            lambda member: self.kafka.remove_member(self.group, member),
            self._rejoin_now,
            self.metrics,
            self._stop,
        )
        host = self.config.address.rpartition(":")[0]
        return advertisement(Endpoint(token, host, self._listener.port))

    def _rejoin_now(self) -> None:
        """A peer was found gone: rejoin the group at once rather than at the next
        heartbeat (the liveness watch's thread; the reader takes it from any thread)."""
        if self._reader is not None:
            self._reader.request_rejoin()

    @property
    def alive(self) -> bool:
        """Whether the owner thread runs (the server's health check)."""
        return self.loop.alive

    # -- which topics to own ------------------------------------------------------------

    def set_queues(self, names: Iterable[str]) -> None:
        """The queues the catalog lists (the queue directory calls this when they
        change); the owner thread subscribes to their topics."""
        self.topics.set_queues(names)

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
                    catalogue.QUEUE_PARTITIONS, float(states[state]), queue=row.name, state=state
                )
            self.metrics.set_gauge(catalogue.QUEUE_PAUSED, float(row.paused), queue=row.name)

    def add_queue(self, name: str) -> None:
        """A queue this server has just created: own its partitions now, before the
        catalog projection lists it."""
        self.topics.add_queue(name)

    def wanted_topics(self) -> set[str]:
        return self.topics.wanted_topics()

    # -- peers (for forwarding and shared rate limits) ---------------------------------

    @property
    def members(self) -> list[GroupMember]:
        return self.peers.members

    @property
    def rate_shares(self) -> Mapping[str, float] | None:
        """This server's share of each queue's partitions, as last told to
        `on_rate_shares` (None before the first members tick that saw them)."""
        return self.duties.members.rate_shares

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

    def serves_all(self, queue: str, partitions: int) -> bool:
        """Whether every partition of `queue` is owned by a live server, and those this
        server owns are serving: what a new queue needs before its jobs can be served."""
        return self.peers.serves_all(self.writer.topic(queue), partitions)

    def peers_for(self, queue: str) -> list[str]:
        """Addresses (host:port) of other live servers owning partitions of `queue`."""
        return self.peers.peers_for(self.writer.topic(queue), self.partitions.retired_from(queue))

    def is_peer(self, address: str) -> bool:
        """Whether the server at `address` (host:port) is a member of the owners' group,
        as the last listing of the members saw it."""
        return self.peers.is_member(address)

    # -- dequeue (Thrift handler threads) and maintenance -------------------------------

    def note_dequeue(self, queue: str, jobs: int) -> None:
        """A dequeue call this server answered (for the adaptive partitions' measure of
        empty answers)."""
        self.dequeue_tally.note(queue, jobs)

    def new_claim(self, source: str) -> str:
        return self.claims.new_claim(source)

    def peek(self, queue: str, limit: int, now: int, coverage: float = 1.0) -> list[DequeuedJob]:
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
    ) -> list[DequeuedJob]:
        """Claim up to `limit` due jobs from owned partitions of `queue`: one claim
        record per partition, answered once the broker has them (with `alongside`, the
        call's acks, in the same round trip)."""
        return self.claims.dequeue(queue, limit, now, actor, coverage, alongside)
