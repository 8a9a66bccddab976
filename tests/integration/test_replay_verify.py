"""`pinledger replay` verifies by default: the log folded in memory and compared with
the live tables as streams, on Postgres and MySQL, in one process or several; a table
changed behind the projection's back is reported; nothing is written."""

from __future__ import annotations

import functools
import subprocess

import psycopg
import pytest

from pinledger.ledger.events import Actor
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Log
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.factory import open_store
from pinledger.projections.projector import ProjectionRunner, Scope
from pinledger.projections.store import LedgerStore
from pinledger.projections.verify import verify
from pinledger.service.testing.servers import run_pinledger
from tests.contract.store_fixtures import each_kind
from tests.integration.workload import Workload
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

ADMIN = Actor(source="test:admin", request_id="", server="test")


def _project(store: LedgerStore, kafka: KafkaLog, prefix: str) -> int:
    runner = ProjectionRunner(store, kafka, prefix)
    try:
        return runner.catch_up()
    finally:
        runner.close()


def _tables(store: LedgerStore) -> list[object]:
    return [store.queues(), store.job_counts()]


def open_ports(kind: str, schema: str) -> tuple[LedgerStore, Log]:
    """A worker process's store and log (module level: it is pickled)."""
    url = stack_settings().mysql_dsn if kind == "mysql" else stack_settings().pg_dsn
    return open_store(url, schema), KafkaLog(
        KafkaSettings(bootstrap=stack_settings().kafka, client_id="test-verify")
    )


@each_kind
def test_a_consistent_projection_verifies_identical_and_nothing_is_written(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    writer.create_queue("busy", 4, 0, ADMIN)
    writer.create_queue("fifo", 1, 0, ADMIN)
    busy = Workload(writer, "busy", 4, seed=31)
    busy.run(300)
    Workload(writer, "fifo", 1, seed=32).run(100)
    projected = _project(store, kafka, prefix)
    before = _tables(store)
    report = verify(store, kafka, prefix, Scope())
    assert report.identical, report.diffs
    assert report.events == projected
    assert _tables(store) == before
    ranged = verify(store, kafka, prefix, Scope(queues=frozenset({"busy"})), max_jobs=5)
    assert ranged.identical, ranged.diffs
    assert ranged.events == busy.events_written


@each_kind
def test_partitions_verified_in_worker_processes_verify_the_same(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    writer.create_queue("q", 3, 0, ADMIN)
    Workload(writer, "q", 3, seed=33).run(150)
    projected = _project(store, kafka, prefix)
    kind = store.kind
    report = verify(
        store,
        kafka,
        prefix,
        Scope(),
        workers=2,
        open_ports=functools.partial(open_ports, kind, store.schema),
    )
    assert report.identical, report.diffs
    assert report.events == projected


@each_kind
def test_only_what_a_lagging_live_projection_holds_is_compared(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    writer.create_queue("q", 2, 0, ADMIN)
    workload = Workload(writer, "q", 2, seed=34)
    workload.run(40)
    projected = _project(store, kafka, prefix)
    workload.run(40)
    report = verify(store, kafka, prefix, Scope())
    assert report.identical, report.diffs
    assert report.events == projected


def test_the_command_reports_a_tampered_timeline_row_on_postgres(
    writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: LedgerStore
) -> None:
    """Postgres only: `store` is the Postgres schema the command's settings name, and
    the timeline row is changed through psycopg."""
    writer.create_queue("q", 2, 0, ADMIN)
    Workload(writer, "q", 2, seed=35).run(60)
    _project(store, kafka, prefix)

    def replay(*args: str) -> subprocess.CompletedProcess[str]:
        return run_pinledger(
            "replay", *args, PINLEDGER_TOPIC_PREFIX=prefix, PINLEDGER_SCHEMA=store.schema
        )

    same = replay("--workers", "2")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical" in same.stdout
    with psycopg.connect(stack_settings().pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {store.schema}.job_events SET verdict = 'tampered', applied = false "
            'WHERE partition = 1 AND idx = 0 AND "offset" = '
            f'(SELECT min("offset") FROM {store.schema}.job_events WHERE partition = 1)'
        )
    different = replay()
    assert different.returncode == 1, different.stdout + different.stderr
    assert "job_events: 1 rows only live, 1 rows only in the replay" in different.stdout
    assert "'verdict': 'tampered'" in different.stdout
    scratch = replay("--into-schema")
    assert scratch.returncode == 1, scratch.stdout + scratch.stderr
    assert "into schema replay_" in scratch.stdout
