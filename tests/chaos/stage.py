"""The chaos tests' stage: servers on the three-broker cluster with their own topic prefix
and schema, and what every case checks after its fault: the acknowledged enqueues drained
to SUCCEEDED, the servers still the same processes (stopping cleanly on SIGTERM), and the
log replaying to exactly the live tables."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pinledger.idl import pinlater as p
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import TopicPolicy
from pinledger.projections.factory import open_store
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.projections.verify import verify
from pinledger.service.assembly import open_shards
from pinledger.service.security.password import hash_password
from pinledger.service.shards.shard_map import load_shard_map
from pinledger.service.testing.servers import ServerProcess, context, wait_for
from tests.chaos.load import Traffic
from tests.settings import stack_settings

PARTITIONS = 4
SESSION_TIMEOUT_MS = 6_000  # the broker's group.min.session.timeout.ms
CLAIM_TIMEOUT_S = 5
# Liveness bounds, not expectations: past them the service is taken as not recovering
# by itself (a restart would be needed) or a job as lost.
WARM_LIMIT_S = 90
RECOVERY_LIMIT_S = 120
DRAIN_LIMIT_S = 180
QUEUE = "chaos"
# deleteQueue's password on the stage's servers.
ADMIN_PASSWORD = "chaos-delete"
_ADMIN_SALT = "chaos"
# The sharded stage's second shard: the stack's MariaDB, which `mariadb kill` crashes.
SHARD_B = {"name": "b", "dsn": stack_settings().mysql_dsn}


@dataclass
class Stage:
    """Servers on the cluster, with their own topic prefix and schema."""

    cluster: str
    servers: list[ServerProcess]
    prefix: str
    schema: str
    settings: dict[str, str]
    log_dir: Path
    pids: list[int] = field(default_factory=list)
    # The shard map file the servers read (PINLEDGER_STORE_SHARDS), when on shards.
    shard_map: str | None = None

    def log(self) -> KafkaLog:
        policy = TopicPolicy(replication_factor=3, min_insync_replicas=2)
        return KafkaLog(
            KafkaSettings(bootstrap=self.cluster, client_id="pinledger-chaos", topics=policy)
        )

    def new_server(self) -> ServerProcess:
        """Another server of the stage, not started yet (a test adds it to `servers`
        and `pids` when it starts it)."""
        return ServerProcess(prefix=self.prefix, schema=self.schema, settings=self.settings)


@contextmanager
def staged(
    cluster: str, tmp_path: Path, sharded: bool = False, servers: int = 2
) -> Iterator[Stage]:
    """`servers` servers and the queue QUEUE; everything the stage made is removed
    after."""
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"chaos{tag}.", f"chaos_{tag}"
    settings = {
        "PINLEDGER_KAFKA": cluster,
        "PINLEDGER_REPLICATION_FACTOR": "3",
        "PINLEDGER_MIN_INSYNC_REPLICAS": "2",
        "PINLEDGER_PARTITIONS": str(PARTITIONS),
        "PINLEDGER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
        "PINLEDGER_CLAIM_TIMEOUT_S": str(CLAIM_TIMEOUT_S),
        "PINLEDGER_ADMIN_SALT": _ADMIN_SALT,
        "PINLEDGER_ADMIN_PASSWORD_SHA256": hash_password(ADMIN_PASSWORD, _ADMIN_SALT),
    }
    shard_map = None
    if sharded:
        shard_map = str(tmp_path / "shards.json")
        shards = [{"name": "a", "dsn": stack_settings().pg_dsn}, SHARD_B]
        Path(shard_map).write_text(json.dumps({"shards": shards}))
        settings["PINLEDGER_STORE_SHARDS"] = shard_map
    stage = Stage(cluster, [], prefix, schema, settings, tmp_path, shard_map=shard_map)
    try:
        for _ in range(servers):
            server = stage.new_server()
            stage.servers.append(server)
            server.start(tmp_path)
            assert server.proc is not None
            stage.pids.append(server.proc.pid)
        client = stage.servers[0].client()
        client.createQueue(context(), QUEUE)
        client.close()
        yield stage
    finally:
        for server in stage.servers:
            if server.proc is not None and server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGCONT)  # a frozen one, if a test failed
            server.stop()
        log = stage.log()
        try:
            for topic in log.topics():
                if topic.startswith(prefix):
                    log.delete_topic(topic)
        finally:
            log.close()
        Store(stack_settings().pg_dsn, schema).drop()
        if sharded:
            mariadb = open_store(stack_settings().mysql_dsn, schema)
            try:
                mariadb.drop()
            finally:
                mariadb.close()


def drain(stage: Stage, load: Traffic, killed: Collection[int] = ()) -> list[str]:
    """Let the workers finish; the acknowledged enqueues still not SUCCEEDED then."""
    survivor = next(i for i in range(len(stage.servers)) if i not in killed)
    client = stage.servers[survivor].client()
    left: list[str] = []

    def finished() -> bool:
        nonlocal left
        try:
            left = load.unfinished(client)
        except p.PinLaterException as exc:
            # A read of a partition whose projection is behind says so; try again.
            assert exc.errorCode == p.ErrorCode.SHARD_CONNECTION_FAILED, exc
            return False
        return not left

    try:
        wait_for(finished, DRAIN_LIMIT_S, 1.0)
    except AssertionError:
        pass  # `left` says which; the caller reports them
    finally:
        client.close()
    return left


def still_running(stage: Stage, killed: Collection[int] = ()) -> None:
    """No server was restarted: each one not killed on purpose is the same process,
    still running; and each stops cleanly on SIGTERM."""
    for index, server in enumerate(stage.servers):
        assert server.proc is not None
        if index in killed:
            continue
        assert server.proc.pid == stage.pids[index]
        assert server.proc.poll() is None, f"server {index} exited:\n{server.log_tail()}"
        server.stop()
        assert server.proc.returncode == 0, (
            f"server {index} did not stop cleanly on SIGTERM "
            f"(exit {server.proc.returncode}):\n{server.log_tail()}"
        )


def replay_is_identical(stage: Stage) -> None:
    if stage.shard_map is not None:  # verified against every shard
        shards = open_shards(load_shard_map(stage.shard_map, ""), stage.schema, stage.prefix)
        kafka = stage.log()
        try:
            report = verify(shards, kafka, stage.prefix, Scope())
            assert report.identical, report.diffs
        finally:
            kafka.close()
            shards.close()
        return
    dsn = stack_settings().pg_dsn
    live = Store(dsn, stage.schema)
    scratch = Store(dsn, f"{stage.schema}_replay")
    log = stage.log()
    try:
        report = replay(live, scratch, log, stage.prefix, Scope())
        assert report.identical, report.diffs
    finally:
        log.close()
        live.close()
        scratch.drop()
