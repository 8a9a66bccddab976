"""The parts every process that serves a cluster assembles the same way: `pinledger
serve` (server.py's `Server`) and `pinledger dashboard` (`DashboardServer`) both open
the projection store and the Kafka log, write through a `LedgerWriter`, cache the
queue directory, watch the queue config, serve the dashboard on the admin HTTP port
and stop on SIGTERM or SIGINT. The command-line tools open their log here too, so
every Kafka client of a config has the same topic policy and append timeout.

The Kafka settings are built here and not by `Config`: the config belongs to the
service room, which names no adapter (tests/unit/test_import_directions.py).
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import uuid
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from pinledger.dashboard.app import Dashboard
from pinledger.dashboard.auth import Sessions
from pinledger.dashboard.backend import AsOfReader, Backend
from pinledger.ledger import adapters, descriptor
from pinledger.ledger.adapters import KafkaClientLog
from pinledger.ledger.clock import SYSTEM_CLOCK
from pinledger.ledger.kafka import KafkaSettings
from pinledger.ledger.log import owners_group
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.asof import QueueAsOf, jobs_then, queue_as_of, why_first
from pinledger.projections.factory import open_store
from pinledger.projections.projector import Bound, Scope
from pinledger.projections.replay import replay
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.store import LedgerStore
from pinledger.service.api.core import Api
from pinledger.service.api.directory import QueueDirectory
from pinledger.service.config import Config, ConfigError
from pinledger.service.observability.admin_http import AdminHttpServer, Health, Progress
from pinledger.service.observability.metrics import Metrics
from pinledger.service.queue_config import QueueConfig, QueueConfigWatcher
from pinledger.service.security import tls
from pinledger.service.shards.placement import Placer
from pinledger.service.shards.shard_map import ShardMap, ShardMapWatcher, home_dsn, load_shard_map

log = logging.getLogger(__name__)


def kafka_settings(config: Config, client_id: str = "") -> KafkaSettings:
    """How a process of this config reaches Kafka: the topics it creates get the
    config's policy, an append waits at most APPEND_TIMEOUT_S. The client id is the
    server id unless a tool names itself."""
    return KafkaSettings(
        bootstrap=config.kafka,
        client_id=client_id or config.server_id,
        topics=config.topic_policy(),
        append_timeout_ms=round(config.append_timeout_s * 1000),
        security=config.kafka_security(),
    )


def check_kafka_client(config: Config) -> None:
    """A ConfigError naming the setting when KAFKA_CLIENT names no adapter."""
    if config.kafka_client not in adapters.CLIENTS:
        raise ConfigError(
            f"setting kafka_client (PINLEDGER_KAFKA_CLIENT) must be one of "
            f"{', '.join(adapters.CLIENTS)}, got {config.kafka_client!r}"
        )


def open_log(config: Config, client_id: str = "") -> KafkaClientLog:
    """The log through the config's Kafka client (KAFKA_CLIENT); a ConfigError names
    the setting when it names no adapter."""
    check_kafka_client(config)
    return adapters.open_log(kafka_settings(config, client_id), config.kafka_client)


class Assembly:
    """The store (migrated: this process may be the first to use the schema), the log,
    its writer, the queue directory and the queue-config watcher. The owner of an
    assembly starts and stops the directory and the watcher in its own order, and
    `close`s the assembly last."""

    def __init__(
        self,
        config: Config,
        store_size: int,
        on_queue_config: Callable[[QueueConfig], None],
    ) -> None:
        self.config = config
        # Checked before anything is opened: a record limit with no room for the
        # largest job stops the start, naming both settings.
        record_limit = config.record_limit()
        if config.admin_password().legacy:
            log.warning(
                "PINLEDGER_ADMIN_PASSWORD_SHA256 holds PinLater's fast hash of the admin "
                "password, which a graphics card guesses billions of times a second: make "
                "a scrypt one with `pinledger hash-password` and set "
                "PINLEDGER_ADMIN_PASSWORD_HASH instead"
            )
        # The shard map (decision 0031): read at start, where the stores are opened; its
        # watcher keeps the placement's view current (a shard made dequeueOnly takes no
        # new partitions from then on).
        shard_map = load_shard_map(config.store_shards, config.store_url)
        self.shard_map = ShardMapWatcher(
            Path(config.store_shards) if config.store_shards else None,
            shard_map,
            self._shard_map_changed,
        )
        # Told the names of shards opened after a change of the map (the server adds
        # their /ready probes).
        self.on_shards_opened: Callable[[list[str]], None] = lambda _: None
        self.store = open_shards(
            shard_map,
            config.schema,
            config.topic_prefix,
            store_size,
            current=(lambda: self.shard_map.current) if config.store_shards else None,
        )
        self.store.migrate()
        self.kafka = open_log(config)
        self.writer = LedgerWriter(self.kafka, config.topic_prefix, record_limit)
        self.writer.placer = Placer(lambda: self.shard_map.current, self.store.queues)
        self.queues = QueueDirectory(self.store)
        self.queue_config = QueueConfigWatcher(
            Path(config.queue_config) if config.queue_config else None, on_queue_config
        )

    def _shard_map_changed(self, shard_map: ShardMap) -> None:
        """A shard added to the map is opened now (the catalog's owner projects the
        catalog into it from its next pass), not only when a partition needs it."""
        store: LedgerStore | None = getattr(self, "store", None)  # None: not opened yet
        if store is not None:
            opened = store.open_listed(s.name for s in shard_map.shards)
            if opened:
                self.on_shards_opened(opened)

    def admin_http(
        self,
        api: Api,
        metrics: Metrics,
        health: Health,
        ready: Health | None = None,
        progress: Progress = dict,
        paused: Health = dict,
    ) -> tuple[Dashboard, AdminHttpServer]:
        """The dashboard, acting through `api`, and the admin HTTP port serving it next
        to /metrics and /health (`paused`: the partitions /ready names)."""
        config = self.config
        group = owners_group(config.topic_prefix)
        dashboard = Dashboard(
            Backend(
                api=api,
                # Asked afresh: an owner's own list is up to 2 s old.
                owners=lambda: self.kafka.group_members(group),
                as_of=as_of_reader(config, self.store, self.kafka),
                sessions=Sessions(config.admin_password(), SYSTEM_CLOCK, self.store),
                trace_url_template=config.trace_url_template,
            )
        )
        admin = AdminHttpServer(
            config.host,
            config.admin_port,
            metrics,
            health,
            ready,
            progress,
            pages=dashboard,
            metrics_token=config.metrics_token,
            tls=tls.admin_context(config),
            paused=paused,
        )
        return dashboard, admin

    def close(self) -> None:
        self.kafka.close()
        self.store.close()


def open_shards(
    shard_map: ShardMap,
    schema: str,
    prefix: str,
    max_size: int = 8,
    current: Callable[[], ShardMap] | None = None,
) -> LedgerStore:
    """The projection store of a shard map (not migrated), every shard's schema named
    `schema`: a ShardedStore that routes each partition to the shard it is placed on
    (decision 0031), or the one store of a map of one shard that cannot change (no
    `current`: a deployment without a map file). With `current`, the watched map, a
    shard added to the map later is opened when a partition is first placed on it."""
    if current is None and len(shard_map.shards) == 1:
        return open_store(shard_map.shards[0].dsn, schema, max_size=max_size)
    stores: dict[str, LedgerStore] = {}
    try:
        for shard in shard_map.shards:
            stores[shard.name] = open_store(shard.dsn, schema, max_size=max_size)
    except BaseException:
        for store in stores.values():
            store.close()
        raise

    def opener(name: str) -> LedgerStore | None:
        shard = None if current is None else current().get(name)
        if shard is None:
            return None
        log.info("opening store shard %r, added to the shard map", name)
        return open_store(shard.dsn, schema, max_size=max_size)

    return ShardedStore(prefix, stores, opener=opener)


def open_configured_store(config: Config, max_size: int = 8) -> LedgerStore:
    """The live projection store a config names: its shard map's shards, or its one
    store (not migrated)."""
    shard_map = load_shard_map(config.store_shards, config.store_url)
    return open_shards(shard_map, config.schema, config.topic_prefix, max_size)


def store_probes(
    store: LedgerStore, only: Collection[str] | None = None
) -> dict[str, Callable[[], object]]:
    """What /ready probes of the store: each store shard (`only` those named), named by
    kind and shard ("postgres:a"), so a shard down is named; the one store of a store
    that is one database by its kind alone ("postgres", "mysql")."""
    return {
        f"{s.kind}:{name}" if name else s.kind: s.queues
        for name, s in store.shards().items()
        if only is None or name in only
    }


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGTERM and SIGINT call `stop` (in the main thread, between its bytecodes: it
    must not block)."""

    def handle(signum: int, _: Any) -> None:
        log.info("signal %d: stopping", signum)
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def as_of_reader(config: Config, live: LedgerStore, kafka: KafkaClientLog) -> AsOfReader:
    """The dashboard's queue as of a moment: a bounded replay of one queue into a
    scratch schema, dropped after reading (what `pinledger replay --as-of` does)."""

    def read(queue: str, at: int, limit: int, pair: Sequence[str]) -> QueueAsOf:
        ds = [descriptor.parse(text) for text in pair]  # before the replay: fail fast
        scratch = open_store(
            home_dsn(config.store_shards, config.store_url),
            f"asof_{uuid.uuid4().hex[:8]}",
            max_size=2,
        )
        try:
            scope = Scope(queues=frozenset({queue}), bound=Bound(at=at))
            replay(live, scratch, kafka, config.topic_prefix, scope)
            state = queue_as_of(scratch, queue, at, limit)
            if len(ds) == 2:
                jobs = jobs_then(scratch, queue, ds)
                _, why = why_first((ds[0], jobs[0]), (ds[1], jobs[1]), at)
                state = dataclasses.replace(state, why=why)
            return state
        finally:
            scratch.drop()

    return read
