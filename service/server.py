"""`pinledger serve`: one server process. Adds to the parts it shares with the
dashboard alone (assembly.py: store, log, writer, queue directory, queue config, admin
HTTP port, signals) the partition owner, the Thrift handler and its listeners, and runs
until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import threading
import time

from pinledger import otel
from pinledger.dashboard.backend import NoOwner
from pinledger.idl import pinlater
from pinledger.ledger.clock import SYSTEM_CLOCK
from pinledger.ledger.commands import Limits
from pinledger.ledger.durability import Severity, findings
from pinledger.ledger.events import Actor
from pinledger.ledger.log import LogError, LogInspector, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.service.api.connections import ConnectionLimits, PinLaterProcessor, ThriftServer
from pinledger.service.api.core import Api
from pinledger.service.api.forwarding import CountingPeerPool
from pinledger.service.api.handler import Handler
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.ratelimit import QueueRateLimits
from pinledger.service.assembly import Assembly, stop_on_signals, store_probes
from pinledger.service.config import Config
from pinledger.service.listeners import Listener
from pinledger.service.observability import catalogue, telemetry
from pinledger.service.observability.health import HealthMonitor, Loop
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.owner import Owner
from pinledger.service.queue_config import QueueConfig
from pinledger.service.security import tls

log = logging.getLogger(__name__)

# `pinledger serve`'s exit code when the cluster's ledger format was raised past what
# this release reads while it served (docs/guides/upgrading.md#ledger-formats).
EXIT_UNREADABLE_FORMAT = 3

# Lots of idle worker connections, each a thread: a small stack keeps thousands cheap.
_THREAD_STACK_BYTES = 512 * 1024
# How long a stopping server lets its connections answer their next call before it
# closes the idle ones (its partitions were handed over before).
LINGER_S = 1.0


class Server:
    def __init__(self, config: Config, shares_port: bool = False) -> None:
        """`shares_port`: a worker of `serve --processes`, whose siblings listen on the
        same port; any other server refuses a port in use (PortInUseError) before it
        connects to anything."""
        self.config = config
        # Checked before anything else: a TLS file that cannot be used stops the start.
        self._tls = tls.server_context(config)
        self._socket = Listener(config.host, config.port, shared=shares_port)
        self._socket.bind()
        self._peer_socket: Listener | None = None
        if config.peer_port and config.peer_port != config.port:
            self._peer_socket = Listener(config.host, config.peer_port)
            self._peer_socket.bind()
        self.metrics = Metrics()
        # OTLP trace export when the OTEL_* variables ask for it (pinledger/otel.py);
        # the spans it loses are counted.
        otel.setup(keep=telemetry.worth_keeping, on_dropped=telemetry.count_dropped(self.metrics))
        # Before the assembly: its queue-config watcher applies the config at once.
        self.rate_limits = QueueRateLimits()
        self.parts = Assembly(config, store_size=16, on_queue_config=self._queue_config_changed)
        self.store, self.kafka, self.writer = self.parts.store, self.parts.kafka, self.parts.writer
        self.queues, self.queue_config = self.parts.queues, self.parts.queue_config
        self.writer.time_appends(
            lambda seconds: self.metrics.observe(catalogue.LOG_APPEND_SECONDS, seconds)
        )
        self.writer.ensure_catalog(
            SYSTEM_CLOCK.now_ms(), Actor(source="pinledger:server", server=config.server_id)
        )
        warn_if_unsafe(self.kafka, catalog_topic(config.topic_prefix), self.writer)
        self.owner = Owner(
            config,
            self.store,
            self.kafka,
            self.writer,
            self.metrics,
            on_catalog_change=self.queues.refresh,
            on_members_change=self._members_changed,
            on_unreadable_format=self._format_unreadable,
            on_rate_shares=self.rate_limits.set_shares,
            queue_config=lambda: self.queue_config.current,
            queue_rows=self.queues.rows,
        )
        # Before listening: a server that cannot read the cluster's ledger format stops
        # here, saying why (UnreadableFormatError).
        self.owner.format.start()
        # Listen first, then read: a change in between is not missed.
        self.queues.on_change = self.owner.set_queues
        self.queues.on_rows = self.owner.set_rows
        self.owner.set_queues(self.queues.names())
        self.peers = CountingPeerPool.of(config, self.metrics)
        self.handler = Handler(
            config,
            self.store,
            self.writer,
            self.owner,
            self.metrics,
            self.queues,
            self.rate_limits,
            lambda: self.queue_config.current,
            self.peers,
        )
        # The schedules duty enqueues its ticks as a client would (decision 0038).
        self.owner.duties.schedules.enqueue = self.handler.enqueue_scheduled
        self.health = HealthMonitor(
            probes={
                # A round trip to a broker (the catalog's end offset) and to the store,
                # named by its kind ("postgres", or "mysql" on MariaDB), or to each
                # store shard ("postgres:a", ...).
                "kafka": lambda: self.kafka.end_offsets([(catalog_topic(config.topic_prefix), 0)]),
                **store_probes(self.store),
            },
            loops={
                "owner": Loop(lambda: self.owner.alive, lambda: self.owner.loop.turned_at),
                "members": self.owner.scheduler.loop("members"),
                "queue-directory": Loop(lambda: self.queues.alive, lambda: self.queues.turned_at),
            },
            metrics=self.metrics,
        )
        self.parts.on_shards_opened = self._shards_opened
        self.dashboard, self.admin = self.parts.admin_http(
            self.handler.api,
            self.metrics,
            self.health.liveness,
            self.health.readiness,
            self.health.progress,
            self.owner.paused_partitions,
        )
        limits = ConnectionLimits(
            max_connections=config.max_connections,
            idle_timeout_s=config.idle_timeout_s,
            max_frame_bytes=config.max_frame_bytes,
        )
        processor = PinLaterProcessor(pinlater.PinLater, self.handler)
        self._thrift = ThriftServer(processor, self._socket, limits, self.metrics, self._tls)
        # A worker of `serve --processes` also listens on its own peer port, the address
        # in its member id, so a forwarded dequeue reaches this process and not whichever
        # process the kernel picks on the shared port. Its connections are counted apart
        # (a Metrics of their own): the open-connections gauge stays the clients'.
        self._peer_thrift: ThriftServer | None = None
        if self._peer_socket is not None:
            self._peer_thrift = ThriftServer(
                processor, self._peer_socket, limits, Metrics(), self._tls
            )
        self._stopped = threading.Event()
        self.exit_code = 0
        self._stop_lock = threading.Lock()
        self._stopping = False

    def _format_unreadable(self, _: str) -> None:
        # The members thread calls this: stop() joins it, so stop from a thread of its own.
        self.exit_code = EXIT_UNREADABLE_FORMAT
        threading.Thread(target=self.stop, daemon=True).start()

    def _queue_config_changed(self, config: QueueConfig) -> None:
        self.rate_limits.set_rates(config.rates())

    def _members_changed(self, members: int) -> None:
        if members == 0:
            # This server is alive, so the group is between generations or has lost it.
            log.warning("the owners' group lists no live servers; this one keeps its share")
        log.info("%d live server(s) share the partitions and rate limits", max(1, members))

    def _shards_opened(self, names: list[str]) -> None:
        for name, probe in store_probes(self.store, names).items():
            self.health.add_probe(name, probe)

    def start(self) -> None:
        threading.stack_size(_THREAD_STACK_BYTES)
        # Listen first: /health answering means the Thrift port takes connections.
        self._socket.listen()
        if self._peer_socket is not None:
            self._peer_socket.listen()
        self.owner.start()
        self.queues.start()
        self.queue_config.start()
        self.parts.shard_map.start()
        self.health.start()
        self.admin.start()
        threading.Thread(
            target=self._thrift.serve_forever, name="thrift-accept", daemon=True
        ).start()
        if self._peer_thrift is not None:
            threading.Thread(
                target=self._peer_thrift.serve_forever, name="thrift-peer-accept", daemon=True
            ).start()
        log.info(
            "pinledger %s serving PinLater on %s:%d%s (peers: %s, admin %s :%d), Kafka %s, "
            "Postgres schema %s, topic prefix %r",
            self.config.server_id,
            self.config.host,
            self.config.port,
            tls.described(self.config),
            self.config.address,
            "https" if self.config.tls_certfile else "http",
            self.admin.port,
            self.config.kafka,
            self.config.schema,
            self.config.topic_prefix,
        )

    def stop(self) -> None:
        with self._stop_lock:
            if self._stopping:
                return
            self._stopping = True
        # Stop accepting (the connections the kernel already took are served), hand the
        # partitions over at once, let each connection answer its next call and close,
        # then close the idle ones and the log (PITFALLS, "A graceful stop"; decision
        # 0039). The owner's claims stop before it leaves the group (Owner.stop), so the
        # calls answered meanwhile claim nothing: their dequeues are forwarded to the
        # new owners, their enqueues and acks appended as always; none is answered
        # after the log closed ("the log is closed").
        thrift = [self._thrift]
        if self._peer_thrift is not None:
            thrift.append(self._peer_thrift)
        for server in thrift:
            server.close()
        self.owner.stop()
        lingering = time.monotonic() + LINGER_S
        for server in thrift:
            server.linger(max(0.0, lingering - time.monotonic()))
        deadline = time.monotonic() + self.config.forward_timeout_s
        for server in thrift:
            if not server.drain(max(0.0, deadline - time.monotonic())):
                log.warning(
                    "stopping with calls still unanswered after %g s; their clients see "
                    "the connection close",
                    self.config.forward_timeout_s,
                )
                break
        self.queues.stop()
        self.queue_config.stop()
        self.parts.shard_map.stop()
        self.admin.stop()
        self.health.stop()
        self.peers.close()
        self.parts.close()
        otel.shutdown()  # flush the spans still batched
        self._stopped.set()

    def run_forever(self) -> int:
        """Serve until stopped; the process's exit code (EXIT_UNREADABLE_FORMAT when the
        cluster's ledger format was raised past what this release reads)."""
        # stop() joins threads: not in the signal handler.
        stop_on_signals(lambda: threading.Thread(target=self.stop, daemon=True).start())
        self.start()
        # Waits in slices: a signal the kernel hands to another thread runs its Python
        # handler only when the main thread runs bytecode (a SIGTERM was once ignored
        # for the 20 s a test waited, the main thread blocked in an untimed wait).
        while not self._stopped.wait(0.5):
            pass
        return self.exit_code


def warn_if_unsafe(inspector: LogInspector, topic: str, writer: LedgerWriter | None = None) -> None:
    """One log line per finding about a topic this server created or uses (the catalog
    stands for them: every topic gets the same policy), e.g. fewer than three replicas
    on a cluster of three or more brokers. `pinledger doctor` shows every topic. The
    `writer` writes no record bigger than the topic takes (max.message.bytes)."""
    try:
        brokers = inspector.broker_count()
        state = inspector.topic_states([topic]).get(topic)
    except LogError as exc:
        log.warning("could not check the topics' durability: %s", exc)
        return
    if state is None:
        return
    if writer is not None:
        configured = writer.max_record_bytes
        if writer.limit_records(state.max_message_bytes):
            log.warning(
                "topic %s takes records of at most %d bytes (max.message.bytes), below "
                "PINLEDGER_MAX_RECORD_BYTES=%d: this server writes none bigger; to write "
                "bigger ones raise the topics' max.message.bytes",
                topic,
                state.max_message_bytes,
                configured,
            )
    for finding in findings(state, brokers):
        if finding.severity is not Severity.NOTE:
            log.warning(
                "%s: %s: %s; to fix: %s (pinledger doctor lists every topic)",
                finding.severity.upper(),
                finding.topic,
                finding.what,
                finding.fix,
            )


class DashboardServer:
    """`pinledger dashboard`: the dashboard alone, on the admin port, pointed at the
    Kafka and Postgres of a cluster. It owns no partition: it reads the projection the
    servers keep and appends its actions to the log like any server."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.metrics = Metrics()
        self.parts = Assembly(config, store_size=4, on_queue_config=lambda _: None)
        self.store, self.kafka, self.queues = self.parts.store, self.parts.kafka, self.parts.queues
        self.queue_config = self.parts.queue_config
        self.peers = PeerPool()
        api = Api(
            config=config,
            store=self.store,
            writer=self.parts.writer,
            owner=NoOwner(self.parts.writer),
            metrics=self.metrics,
            queues=self.queues,
            rate_limits=QueueRateLimits(),
            queue_config=lambda: self.queue_config.current,
            peers=self.peers,
            clock=SYSTEM_CLOCK,
            limits=Limits(max_priority=config.max_priority, max_body_bytes=config.max_body_bytes),
        )
        self.dashboard, self.admin = self.parts.admin_http(
            api, self.metrics, lambda: {self.store.kind: "ok"}
        )
        self._stopped = threading.Event()

    def run_forever(self) -> None:
        stop_on_signals(self._stopped.set)
        self.queues.start()
        self.queue_config.start()
        self.parts.shard_map.start()
        self.admin.start()
        log.info(
            "pinledger dashboard on %s://%s:%d/ (Kafka %s, Postgres schema %s, prefix %r)",
            "https" if self.config.tls_certfile else "http",
            self.config.host,
            self.admin.port,
            self.config.kafka,
            self.config.schema,
            self.config.topic_prefix,
        )
        while not self._stopped.wait(0.5):  # in slices: see Server.run_forever
            pass
        self.admin.stop()
        self.queue_config.stop()
        self.parts.shard_map.stop()
        self.queues.stop()
        self.peers.close()
        self.parts.close()
