"""Every periodic duty of a server, built in one place (`build_duties`) and listed in its
lanes in one place (`Duties.scheduler`). The owner calls it, so `pinledger serve`
(server.py) and the test runtime (testing/runtime.py) run the same duties, wired once.

    lane (its thread)        duty, in order       every                          where
    owner (the owner's pass) claim-timeouts       1 s, the first at once         every server
                             garbage-collection   PINLEDGER_GC_INTERVAL_S        every server
    members (owner-members)  ledger-format        2 s                            every server
                             queue-sizes          2 s                            catalog owner
                             retirement           2 s                            catalog owner
                             adaptation           2 s                            every server*
                             members              2 s                            every server
    timeline-retention       timeline-retention   600 s, the first at once       every server
    schedules                schedules            1 s                            catalog owner
    queue-gauges             queue-gauges         PINLEDGER_QUEUE_METRICS_       catalog owner
                                                  INTERVAL_S (0: no such lane)

An every-server duty acts on the server's own partitions or its own view (the members
list, the ledger format it writes with, its share of the dequeue calls*: each server
closes its own measuring windows, while the catalog's owner alone resizes), or on what
the store makes safe to do from every server (the timeline's partitions). A
catalog-owner duty is scheduled on every server and stands by on all but one, so a
failover hands it over within one interval. A first run not at once comes one interval
after the lane starts.

Why these lanes: the owner lane's duties drop a partition whose store shard fails them,
which only the owner thread may do (scheduler.py); the members lane keeps the order the
members tick always had (the ledger format first, so that the resizes after it write
with the format it read; the members list before the rate shares and the watchdog that
read it, members.py); the timeline's DDL and the queue gauges' reads each have a thread
of their own so that their waits hold up neither the owner nor the members tick, as
before; so does the schedules duty, whose enqueues wait for their projection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pinledger.ledger.clock import Clock
from pinledger.ledger.events import Actor
from pinledger.ledger.log import Log, owners_group
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import LedgerStore, QueueRow
from pinledger.service.config import Config
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.loop import OwnerLoop
from pinledger.service.ownership.maintenance.adaptation import Adaptation, DequeueTally
from pinledger.service.ownership.maintenance.claim_timeouts import ClaimTimeouts
from pinledger.service.ownership.maintenance.garbage_collection import Collector
from pinledger.service.ownership.maintenance.ledger_format import ClusterFormat
from pinledger.service.ownership.maintenance.members import Members
from pinledger.service.ownership.maintenance.queue_gauges import QueueGauges
from pinledger.service.ownership.maintenance.queue_sizes import QueueSizes
from pinledger.service.ownership.maintenance.retirement import Retirement
from pinledger.service.ownership.maintenance.scheduler import Lane, Scheduler
from pinledger.service.ownership.maintenance.schedules import Schedules
from pinledger.service.ownership.maintenance.timeline_retention import TimelineRetention
from pinledger.service.ownership.maintenance.watchdog import Watchdog
from pinledger.service.ownership.partitions import Partitions
from pinledger.service.ownership.peers import Peers
from pinledger.service.ownership.topics import OwnedTopics
from pinledger.service.queue_config import QueueConfig


@dataclass(frozen=True, slots=True)
class Sources:
    """What the duties read that the owner does not hold: the queue config as the server
    last read its file, and the catalog's queues as its queue directory last read them."""

    queue_config: Callable[[], QueueConfig]
    queues: Callable[[], Iterable[QueueRow]]


@dataclass(frozen=True, slots=True)
class Duties:
    """One server's periodic duties (queue_gauges: None when
    PINLEDGER_QUEUE_METRICS_INTERVAL_S is 0)."""

    claim_timeouts: ClaimTimeouts
    garbage_collection: Collector
    ledger_format: ClusterFormat
    queue_sizes: QueueSizes
    retirement: Retirement
    adaptation: Adaptation
    members: Members
    timeline_retention: TimelineRetention
    schedules: Schedules
    queue_gauges: QueueGauges | None
    # Whether this server owns the catalog's partition now.
    leads: Callable[[], bool]

    def scheduler(self, clock: Clock, stop: threading.Event) -> Scheduler:
        """The one scheduler of them all, in their lanes (the table above)."""
        lanes = [
            Lane("owner", [self.claim_timeouts, self.garbage_collection], clock, self.leads, None),
            Lane(
                "members",
                [
                    self.ledger_format,
                    self.queue_sizes,
                    self.retirement,
                    self.adaptation,
                    self.members,
                ],
                clock,
                self.leads,
                "owner-members",
            ),
            Lane(
                "timeline-retention",
                [self.timeline_retention],
                clock,
                self.leads,
                "timeline-retention",
            ),
        ]
        lanes.append(Lane("schedules", [self.schedules], clock, self.leads, "schedules"))
        if self.queue_gauges is not None:
            lanes.append(
                Lane("queue-gauges", [self.queue_gauges], clock, self.leads, "queue-gauges")
            )
        return Scheduler(lanes, clock, stop)


def build_duties(
    *,
    config: Config,
    store: LedgerStore,
    kafka: Log,
    writer: LedgerWriter,
    metrics: Metrics,
    clock: Clock,
    partitions: Partitions,
    topics: OwnedTopics,
    peers: Peers,
    loop: OwnerLoop,
    rejoin: threading.Event,
    tally: DequeueTally,
    sources: Sources,
    on_rate_shares: Callable[[Mapping[str, float]], None],
    on_unreadable_format: Callable[[str], None],
) -> Duties:
    """The duties of the owner made of these parts (`rejoin`: the watchdog's rebalance
    request to the owner thread; `tally`: the dequeue calls this server answered)."""

    def leads() -> bool:
        return partitions.catalog is not None

    server = config.server_id
    owner = Actor(source="pinledger:owner", server=server)
    watchdog = Watchdog(
        owners_group(config.topic_prefix), kafka, topics, partitions, loop, rejoin, clock
    )
    return Duties(
        claim_timeouts=ClaimTimeouts(partitions, writer, metrics, owner, config.claim_timeout_s),
        garbage_collection=Collector(
            partitions,
            writer,
            metrics,
            owner,
            config.succeeded_ttl_s,
            config.failed_ttl_s,
            config.gc_interval_s,
        ),
        ledger_format=ClusterFormat(
            kafka, config.topic_prefix, writer, metrics, on_unreadable_format
        ),
        queue_sizes=QueueSizes(
            writer,
            sources.queue_config,
            sources.queues,
            clock,
            Actor(source="pinledger:queue-config", server=server),
        ),
        retirement=Retirement(writer, store, sources.queues, clock, owner, config.retire_after_s),
        adaptation=Adaptation(
            writer,
            store,
            tally,
            metrics,
            leads,
            sources.queue_config,
            sources.queues,
            clock,
            Actor(source="pinledger:adaptive", server=server),
            config.max_priority,
        ),
        members=Members(
            peers,
            watchdog,
            kafka,
            config.topic_prefix,
            partitions.retired_from,
            on_rate_shares,
        ),
        timeline_retention=TimelineRetention(store, config.history_retention_days),
        queue_gauges=(
            QueueGauges(
                store,
                metrics,
                clock,
                config.max_priority,
                config.queue_metrics_cap,
                config.queue_metrics_interval_s,
            )
            if config.queue_metrics_interval_s > 0
            else None
        ),
        schedules=Schedules(
            store,
            writer,
            sources.queue_config,
            sources.queues,
            metrics,
            clock,
            Actor(source="pinledger:schedule", server=server),
        ),
        leads=leads,
    )
