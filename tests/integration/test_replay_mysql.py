"""Replay rebuilds exactly what the live projection holds, on the MySQL store (MariaDB):
the same projector and diff as on Postgres (tests/integration/test_replay.py), over a
live database and a scratch one."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pymysql
import pytest

from pinledger.ledger.events import Actor
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.projector import Bound, ProjectionRunner, Scope
from pinledger.projections.replay import replay
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import fresh_store
from tests.integration.workload import Workload
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

ADMIN = Actor(source="test:admin", request_id="", server="test")


@pytest.fixture
def my_store() -> Iterator[LedgerStore]:
    fresh = fresh_store("mysql", "live")
    yield fresh
    fresh.drop()


@pytest.fixture
def my_scratch() -> Iterator[LedgerStore]:
    fresh = fresh_store("mysql", "scratch")
    yield fresh
    fresh.drop()


def _project(store: LedgerStore, kafka: KafkaLog, prefix: str) -> int:
    runner = ProjectionRunner(store, kafka, prefix)
    try:
        return runner.catch_up()
    finally:
        runner.close()


def test_random_events_replay_identically_on_mysql(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    my_store: LedgerStore,
    my_scratch: LedgerStore,
) -> None:
    writer.create_queue("busy", 4, 0, ADMIN)
    writer.create_queue("fifo", 1, 0, ADMIN)
    busy = Workload(writer, "busy", 4, seed=11)
    busy.run(300)
    fifo = Workload(writer, "fifo", 1, seed=12)
    fifo.run(100)

    projected = _project(my_store, kafka, prefix)
    assert projected == busy.events_written + fifo.events_written
    for workload in (busy, fifo):
        for partition, expected in enumerate(workload.jobs):
            live = my_store.partition_jobs(workload.queue, partition)
            assert live == expected, "the projection holds exactly what the ledger decided"

    report = replay(my_store, my_scratch, kafka, prefix, Scope())
    assert report.events == projected
    assert report.identical, report.diffs


def test_replay_reports_a_tampered_live_table_on_mysql(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    my_store: LedgerStore,
    my_scratch: LedgerStore,
) -> None:
    writer.create_queue("q", 2, 0, ADMIN)
    Workload(writer, "q", 2, seed=3).run(60)
    _project(my_store, kafka, prefix)
    # Behind the store's back, as an operator's mistake would be.
    dsn = urlsplit(stack_settings().mysql_dsn)
    conn = pymysql.connect(
        host=dsn.hostname or "127.0.0.1",
        port=dsn.port or 3306,
        user=dsn.username or "",
        password=dsn.password or "",
        database=my_store.schema,
        autocommit=True,
    )
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE jobs SET custom_status = 'tampered' "
            "WHERE `partition` = 0 ORDER BY local_id LIMIT 1"
        )
    conn.close()
    report = replay(my_store, my_scratch, kafka, prefix, Scope(partition=0))
    assert not report.identical
    jobs = next(d for d in report.diffs if d.table == "jobs")
    assert (jobs.only_live, jobs.only_replay) == (1, 1)
    assert jobs.live_samples[0]["custom_status"] == "tampered"


def test_bounded_replay_shows_the_state_at_an_offset_on_mysql(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    my_store: LedgerStore,
    my_scratch: LedgerStore,
) -> None:
    writer.create_queue("q", 1, 0, ADMIN)
    workload = Workload(writer, "q", 1, seed=5)
    workload.run(20)
    snapshot = dict(workload.jobs[0])
    middle = kafka.end_offset(writer.topic("q"), 0)
    workload.run(20)
    report = replay(my_store, my_scratch, kafka, prefix, Scope(bound=Bound(offset=middle)))
    assert not report.compared
    assert my_scratch.partition_jobs("q", 0) == snapshot
