"""One fault at a time, under load through two servers on the three-broker cluster
(replication 3, min ISR 2): a broker crash, all of Kafka down for 60 s, Postgres down
for 20 s, a server frozen past its session timeout, a server killed, and one store
shard of two (MariaDB, beside a Postgres home shard) down for 20 s while the partitions
on the other serve throughout.

After each: every acknowledged enqueue ends SUCCEEDED (nothing lost), runs beyond a
job's first are counted (at-least-once), the log replays to exactly the live tables,
the servers still run as the same processes (nobody restarted them) and stop cleanly
on SIGTERM, and the time until every partition is served again is measured. A server
that needed a restart fails the test (it is not served again within the limit); so
does a lost job. The figures go into the table the suite prints at the end.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import TopicPolicy
from pinledger.projections.factory import open_store
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.projections.verify import verify
from pinledger.service.assembly import open_shards
from pinledger.service.store_shards import load_shard_map
from pinledger.service.testing.servers import ServerProcess, context, wait_for
from tests.chaos.conftest import stack
from tests.chaos.load import Load
from tests.chaos.report import ROWS, Row
from tests.settings import stack_settings

pytestmark = pytest.mark.chaos

PARTITIONS = 4
SESSION_TIMEOUT_MS = 6_000  # the broker's group.min.session.timeout.ms
CLAIM_TIMEOUT_S = 5
# Liveness bounds, not expectations: past them the service is taken as not recovering
# by itself (a restart would be needed) or a job as lost.
WARM_LIMIT_S = 90
RECOVERY_LIMIT_S = 120
DRAIN_LIMIT_S = 180
QUEUE = "chaos"
# How long all of Kafka stays down: 60 s in CI; set it to 300 to try a 5-minute outage.
KAFKA_DOWN_S = float(os.environ.get("PINLEDGER_CHAOS_KAFKA_DOWN_S", "60"))
# The sharded stage's second shard: the stack's MariaDB, which `mariadb kill` crashes.
SHARD_B = {"name": "b", "dsn": stack_settings().mysql_dsn}
# Partitions placed on the home shard "a" (the fewest rule alternates a, b, a, b).
ON_A = {0, 2}


@dataclass
class Stage:
    """Two servers on the cluster, with their own topic prefix and schema."""

    cluster: str
    servers: list[ServerProcess]
    prefix: str
    schema: str
    pids: list[int] = field(default_factory=list)
    # The shard map file the servers read (PINLEDGER_STORE_SHARDS), when on shards.
    shard_map: str | None = None

    def log(self) -> KafkaLog:
        policy = TopicPolicy(replication_factor=3, min_insync_replicas=2)
        return KafkaLog(
            KafkaSettings(bootstrap=self.cluster, client_id="pinledger-chaos", topics=policy)
        )


@contextmanager
def staged(cluster: str, tmp_path: Path, sharded: bool = False) -> Iterator[Stage]:
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"chaos{tag}.", f"chaos_{tag}"
    settings = {
        "PINLEDGER_KAFKA": cluster,
        "PINLEDGER_REPLICATION_FACTOR": "3",
        "PINLEDGER_MIN_INSYNC_REPLICAS": "2",
        "PINLEDGER_PARTITIONS": str(PARTITIONS),
        "PINLEDGER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
        "PINLEDGER_CLAIM_TIMEOUT_S": str(CLAIM_TIMEOUT_S),
    }
    shard_map = None
    if sharded:
        shard_map = str(tmp_path / "shards.json")
        shards = [{"name": "a", "dsn": stack_settings().pg_dsn}, SHARD_B]
        Path(shard_map).write_text(json.dumps({"shards": shards}))
        settings["PINLEDGER_STORE_SHARDS"] = shard_map
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=settings) for _ in range(2)]
    stage = Stage(cluster, servers, prefix, schema, shard_map=shard_map)
    try:
        for server in servers:
            server.start(tmp_path)
            assert server.proc is not None
            stage.pids.append(server.proc.pid)
        client = servers[0].client()
        client.createQueue(context(), QUEUE)
        client.close()
        yield stage
    finally:
        for server in servers:
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


@pytest.fixture
def stage(cluster: str, tmp_path: Path) -> Iterator[Stage]:
    with staged(cluster, tmp_path) as made:
        yield made


@pytest.fixture
def sharded_stage(cluster: str, tmp_path: Path) -> Iterator[Stage]:
    """The stage on two store shards: Postgres (home, "a") and MariaDB ("b"); the
    queue's four partitions are placed a, b, a, b."""
    with staged(cluster, tmp_path, sharded=True) as made:
        yield made


@dataclass
class Fault:
    name: str
    inject: Callable[[Stage], None]
    hold_s: float
    repair: Callable[[Stage], None]
    # Recovery counts from the repair (a dependency answers again) or, for a server
    # fault that nothing repairs, from the fault itself.
    measured_from: str
    # Servers the fault kills on purpose: they are not expected to run afterwards.
    killed: frozenset[int] = frozenset()
    # Checked at the end of the hold, before the repair, with the load and the time of
    # the fault: what must go on while it lasts.
    meanwhile: Callable[[Load, float], None] | None = None


def survive(stage: Stage, fault: Fault) -> Row:
    """Drive load through the stage's servers, inject the fault, and check and measure
    what a user would: see the module docstring."""
    with Load(stage.servers, QUEUE) as load:
        began = time.monotonic()
        wait_for(lambda: load.served_again(began, PARTITIONS) is not None, WARM_LIMIT_S, 0.2)
        time.sleep(2)

        fault_at = time.monotonic()
        fault.inject(stage)
        time.sleep(fault.hold_s)
        if fault.meanwhile is not None:
            fault.meanwhile(load, fault_at)
        fault.repair(stage)
        repaired_at = time.monotonic()

        since = repaired_at if fault.measured_from == "repair" else fault_at
        try:
            recovered_s: float = wait_for(
                lambda: load.served_again(since, PARTITIONS), RECOVERY_LIMIT_S, 0.1
            )
        except AssertionError:
            pytest.fail(
                f"{fault.name}: not every partition was served again within "
                f"{RECOVERY_LIMIT_S} s of the {fault.measured_from}, without a restart.\n"
                f"Since then: {load.since(since)}\n"
                + "\n".join(f"server {i} log:\n{s.log()}" for i, s in enumerate(stage.servers))
            )
        time.sleep(2)  # more load on the recovered service
        load.stop_producing()
        lost = drain(stage, load, fault)
    failures = load.failures_between(fault_at, since + recovered_s)
    still_running(stage, fault)
    replay_is_identical(stage)
    return Row(
        fault=fault.name,
        jobs=len(load.record.enqueued),
        lost=len(lost),
        duplicate_runs=load.duplicate_runs(),
        recovered_s=recovered_s,
        measured_from=fault.measured_from,
        failed_calls=len(failures),
        longest_failed_call_s=max((f.seconds for f in failures), default=0.0),
        answers=Counter(f.what[:110] for f in failures),
    )


def drain(stage: Stage, load: Load, fault: Fault) -> list[str]:
    """Let the workers finish; the acknowledged enqueues still not SUCCEEDED then."""
    survivor = next(i for i in range(len(stage.servers)) if i not in fault.killed)
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


def still_running(stage: Stage, fault: Fault) -> None:
    """No server was restarted: each one the fault did not kill is the same process,
    still running; and each stops cleanly on SIGTERM."""
    for index, server in enumerate(stage.servers):
        assert server.proc is not None
        if index in fault.killed:
            continue
        assert server.proc.pid == stage.pids[index]
        assert server.proc.poll() is None, f"server {index} exited:\n{server.log()}"
        server.stop()
        assert server.proc.returncode == 0, (
            f"server {index} did not stop cleanly on SIGTERM "
            f"(exit {server.proc.returncode}):\n{server.log()}"
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


def check(row: Row) -> None:
    ROWS.append(row)
    assert row.lost == 0, f"{row.fault}: {row.lost} acknowledged jobs were lost"


def nothing(_: Stage) -> None:
    pass


def run_stack(*args: str) -> Callable[[Stage], None]:
    def run(_: Stage) -> None:
        stack(*args)

    return run


def test_one_broker_killed(stage: Stage) -> None:
    check(
        survive(
            stage,
            Fault(
                "one broker killed for 20 s",
                inject=run_stack("cluster", "kill", "1"),
                hold_s=20,
                repair=run_stack("cluster", "start", "1"),
                # The other two keep the cluster going: what a user waits for is the
                # new leaders of the partitions broker 1 led.
                measured_from="fault",
            ),
        )
    )


def test_all_of_kafka_killed(stage: Stage) -> None:
    check(
        survive(
            stage,
            Fault(
                f"all three brokers killed for {KAFKA_DOWN_S:.0f} s",
                inject=run_stack("cluster", "kill", "1", "2", "3"),
                hold_s=KAFKA_DOWN_S,
                repair=run_stack("cluster", "start", "1", "2", "3"),
                measured_from="repair",
            ),
        )
    )


def test_postgres_killed_for_20_s(stage: Stage) -> None:
    check(
        survive(
            stage,
            Fault(
                "Postgres killed for 20 s",
                inject=run_stack("pg", "kill"),
                hold_s=20,
                repair=run_stack("pg", "start"),
                measured_from="repair",
            ),
        )
    )


def signal_server(index: int, signum: signal.Signals) -> Callable[[Stage], None]:
    def send(stage: Stage) -> None:
        proc: Any = stage.servers[index].proc
        os.kill(proc.pid, signum)

    return send


def test_a_server_frozen_past_its_session_timeout(stage: Stage) -> None:
    check(
        survive(
            stage,
            Fault(
                f"server frozen (SIGSTOP) {3 * SESSION_TIMEOUT_MS // 1000} s",
                inject=signal_server(1, signal.SIGSTOP),
                hold_s=3 * SESSION_TIMEOUT_MS / 1000,
                repair=signal_server(1, signal.SIGCONT),
                measured_from="fault",
            ),
        )
    )


def test_a_server_killed(stage: Stage) -> None:
    check(
        survive(
            stage,
            Fault(
                "server killed (SIGKILL)",
                inject=lambda s: s.servers[1].kill(),
                hold_s=0,
                repair=nothing,
                measured_from="fault",
                killed=frozenset({1}),
            ),
        )
    )


def home_partitions_served(load: Load, fault_at: float) -> None:
    """The partitions on the shard that stayed up were dequeued and acked while the
    other was down (after a few seconds for the owners to find it down)."""
    served = load.served_between(fault_at + 5, time.monotonic())
    assert served >= ON_A, f"while shard b was down only partitions {sorted(served)} served"


def test_one_store_shard_killed_for_20_s(sharded_stage: Stage) -> None:
    check(
        survive(
            sharded_stage,
            Fault(
                "store shard b of two killed for 20 s",
                inject=run_stack("mariadb", "kill"),
                hold_s=20,
                repair=run_stack("mariadb", "start"),
                measured_from="repair",
                meanwhile=home_partitions_served,
            ),
        )
    )
