"""Replay rebuilds exactly what the live projection holds, on each SQL store: the same
projector and diff over a live schema and a scratch one (a MariaDB database each on
MySQL)."""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
import pymysql

from pinledger.ledger.events import Actor
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections.projector import Bound, ProjectionRunner, Scope
from pinledger.projections.replay import replay
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import each_kind, store_dsn
from tests.integration.workload import Workload

ADMIN = Actor(source="test:admin", request_id="", server="test")


def _project(store: LedgerStore, kafka: KafkaLog, prefix: str) -> int:
    runner = ProjectionRunner(store, kafka, prefix)
    try:
        return runner.catch_up()
    finally:
        runner.close()


def _tamper(store: LedgerStore) -> None:
    """Change one job of partition 0 behind the store's back, as an operator's mistake
    would."""
    if store.kind == "postgres":
        with psycopg.connect(store_dsn("postgres"), autocommit=True) as conn:
            conn.execute(
                f"UPDATE {store.schema}.jobs SET custom_status = 'tampered' "
                "WHERE local_id = (SELECT min(local_id) FROM "
                f"{store.schema}.jobs WHERE partition = 0) AND partition = 0"
            )
        return
    dsn = urlsplit(store_dsn("mysql"))
    my_conn = pymysql.connect(
        host=dsn.hostname or "127.0.0.1",
        port=dsn.port or 3306,
        user=dsn.username or "",
        password=dsn.password or "",
        database=store.schema,
        autocommit=True,
    )
    with my_conn.cursor() as cur:
        cur.execute(
            "UPDATE jobs SET custom_status = 'tampered' "
            "WHERE `partition` = 0 ORDER BY local_id LIMIT 1"
        )
    my_conn.close()


@each_kind
def test_thousands_of_random_events_replay_identically(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    store: LedgerStore,
    scratch: LedgerStore,
) -> None:
    writer.create_queue("busy", 4, 0, ADMIN)
    writer.create_queue("fifo", 1, 0, ADMIN)
    busy = Workload(writer, "busy", 4, seed=11)
    busy.run(500)
    fifo = Workload(writer, "fifo", 1, seed=12)
    fifo.run(150)
    assert busy.events_written + fifo.events_written > 3000

    projected = _project(store, kafka, prefix)
    assert projected == busy.events_written + fifo.events_written
    for workload in (busy, fifo):
        for partition, expected in enumerate(workload.jobs):
            live = store.partition_jobs(workload.queue, partition)
            assert live == expected, "the projection holds exactly what the ledger decided"

    report = replay(store, scratch, kafka, prefix, Scope())
    assert report.events == projected
    assert report.identical, report.diffs


@each_kind
def test_replay_reports_a_tampered_live_table(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    store: LedgerStore,
    scratch: LedgerStore,
) -> None:
    writer.create_queue("q", 2, 0, ADMIN)
    Workload(writer, "q", 2, seed=3).run(60)
    _project(store, kafka, prefix)
    _tamper(store)
    report = replay(store, scratch, kafka, prefix, Scope(partition=0))
    assert not report.identical
    jobs = next(d for d in report.diffs if d.table == "jobs")
    assert (jobs.only_live, jobs.only_replay) == (1, 1)
    assert jobs.live_samples[0]["custom_status"] == "tampered"


@each_kind
def test_bounded_replay_shows_the_state_at_an_offset(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    store: LedgerStore,
    scratch: LedgerStore,
) -> None:
    writer.create_queue("q", 1, 0, ADMIN)
    workload = Workload(writer, "q", 1, seed=5)
    workload.run(20)
    snapshot = dict(workload.jobs[0])
    middle = kafka.end_offset(writer.topic("q"), 0)
    workload.run(20)
    report = replay(store, scratch, kafka, prefix, Scope(bound=Bound(offset=middle)))
    assert not report.compared
    assert scratch.partition_jobs("q", 0) == snapshot


@each_kind
def test_replay_compares_only_what_a_lagging_live_projection_holds(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    store: LedgerStore,
    scratch: LedgerStore,
) -> None:
    # A live projection behind the log (a server stopped mid-way) is not a difference:
    # the replay stops where the live tables stop.
    writer.create_queue("q", 2, 0, ADMIN)
    workload = Workload(writer, "q", 2, seed=8)
    workload.run(40)
    projected = _project(store, kafka, prefix)
    workload.run(40)
    report = replay(store, scratch, kafka, prefix, Scope())
    assert report.compared
    assert report.events == projected
    assert report.identical, report.diffs


def test_one_statement_upserts_project_the_same_rows_on_postgres(
    writer: LedgerWriter,
    kafka: KafkaLog,
    prefix: str,
    store: LedgerStore,
    scratch: LedgerStore,
) -> None:
    # Postgres only: only its store has two ways to upsert a batch's jobs. The live side
    # upserts every batch as one statement (staged binary COPY, the default); the replay
    # here upserts row by row (pipelined): the tables must come out identical.
    assert store.kind == "postgres"
    writer.create_queue("q", 2, 0, ADMIN)
    Workload(writer, "q", 2, seed=21).run(120)
    _project(store, kafka, prefix)
    row_by_row = PgStore(store_dsn("postgres"), scratch.schema, one_statement_upserts=10**9)
    try:
        report = replay(store, row_by_row, kafka, prefix, Scope())
    finally:
        row_by_row.close()
    assert report.events > 0
    assert report.identical, report.diffs
