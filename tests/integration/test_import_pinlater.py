"""`pinledger import-pinlater` on a MariaDB database laid out exactly like PinLater's
(plq_<shard>_<queue> databases, jobs_p<priority> tables), filled with jobs in every
state: the ledger, projected (into MariaDB and into Postgres), holds each job as
PinLater did, finds it by its PinLater descriptor, and a second run imports nothing. A
queue whose jobs already hold PinLater's descriptors is refused."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pymysql
import pytest

from pinledger.cli.import_guard import ImportRefusedError
from pinledger.cli.import_pinlater import run_import
from pinledger.ledger import descriptor
from pinledger.ledger.events import Actor, Enqueued
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.state import JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pinlater.reader import PinLaterSource
from pinledger.projections.projector import ProjectionRunner
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import fresh_store
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

# PinLater's jobs table (its MySQL backend), one per priority in each shard's database.
PINLATER_TABLE = """CREATE TABLE {table} (
    local_id BIGINT NOT NULL AUTO_INCREMENT,
    state TINYINT NOT NULL,
    claim_descriptor VARCHAR(200),
    attempts_allowed INT,
    attempts_remaining INT,
    custom_status VARCHAR(1000) DEFAULT '',
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    run_after TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    body LONGBLOB,
    PRIMARY KEY (local_id),
    INDEX state_run_after (state, run_after)
) ENGINE=InnoDB"""
INSERT = (
    "INSERT INTO {table} (state, claim_descriptor, attempts_allowed, attempts_remaining, "
    "custom_status, created_at, run_after, updated_at, body) VALUES "
    "(%s, %s, %s, %s, %s, FROM_UNIXTIME(%s), FROM_UNIXTIME(%s), FROM_UNIXTIME(%s), %s)"
)

NOW_S = int(time.time())
PAST_S, FUTURE_S = NOW_S - 3600, NOW_S + 86_400


@dataclass(frozen=True)
class Row:
    state: JobState
    allowed: int
    remaining: int
    status: str
    run_after_s: int
    body: bytes
    claim: str | None = None


# Every state, with attempts used and not, custom statuses, due and delayed.
ROWS = [
    Row(JobState.PENDING, 3, 3, "", PAST_S, b"fresh"),
    Row(JobState.PENDING, 5, 2, "retried twice", PAST_S, b"retried"),
    Row(JobState.PENDING, 2, 2, "", FUTURE_S, b"delayed"),
    Row(JobState.PENDING, 4, 1, "backoff", FUTURE_S, b"delayed after failures"),
    Row(JobState.IN_PROGRESS, 3, 2, "working", PAST_S, b"running", "host:worker:7"),
    Row(JobState.SUCCEEDED, 2, 2, "done", PAST_S, b"ok \x00\xff"),
    Row(JobState.SUCCEEDED, 3, 1, "done at last", PAST_S, b"ok late"),
    Row(JobState.FAILED, 3, 0, "gave up", PAST_S, b"broken"),
    Row(JobState.FAILED, 1, 0, "", PAST_S, b"broken once"),
]


def _connect(database: str | None = None) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    url = urlsplit(stack_settings().mysql_dsn)
    return pymysql.connect(
        host=url.hostname or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "",
        password=url.password or "",
        database=database,
        autocommit=True,
    )


@pytest.fixture
def pinlater() -> Iterator[str]:
    """A PinLater deployment of one queue on two shards, priorities 1 and 2; returns the
    queue's name. The databases are dropped afterwards."""
    queue = f"imp{uuid.uuid4().hex[:8]}"
    databases = [f"plq_1_{queue}", f"plq_2_{queue}"]
    conn = _connect()
    try:
        with conn.cursor() as cur:
            for shard, database in enumerate(databases):
                cur.execute(f"CREATE DATABASE {database}")
                for priority in (1, 2):
                    table = f"{database}.jobs_p{priority}"
                    cur.execute(PINLATER_TABLE.format(table=table))
                    rows = ROWS if (shard, priority) == (0, 1) else ROWS[:2]
                    for row in rows:
                        cur.execute(
                            INSERT.format(table=table),
                            (
                                int(row.state),
                                row.claim,
                                row.allowed,
                                row.remaining,
                                row.status,
                                PAST_S,
                                row.run_after_s,
                                PAST_S,
                                row.body,
                            ),
                        )
        yield queue
    finally:
        with conn.cursor() as cur:
            for database in databases:
                cur.execute(f"DROP DATABASE IF EXISTS {database}")
        conn.close()


@pytest.fixture(params=["mysql", "postgres"])
def my_store(request: pytest.FixtureRequest) -> Iterator[LedgerStore]:
    """The projection store, on each kind."""
    fresh = fresh_store(request.param, "imported")
    yield fresh
    fresh.drop()


def _project(store: LedgerStore, kafka: KafkaLog, prefix: str) -> int:
    runner = ProjectionRunner(store, kafka, prefix)
    try:
        return runner.catch_up()
    finally:
        runner.close()


def test_every_pinlater_job_is_imported_in_its_state_once(
    pinlater: str, writer: LedgerWriter, kafka: KafkaLog, prefix: str, my_store: LedgerStore
) -> None:
    source = PinLaterSource(stack_settings().mysql_dsn)
    lines: list[str] = []
    try:
        summary = run_import(source, writer, kafka, [pinlater], say=lines.append)
        shards = source.shards([pinlater])
        assert [s.shard for s in shards] == ["1", "2"]
        first = shards[0]
        new = [source.imported_as(first, 1, local_id) for local_id in range(1, len(ROWS) + 1)]
    finally:
        source.close()
    assert summary.queues == 1
    assert summary.jobs == len(ROWS) + 3 * 2
    assert summary.by_state["PENDING"] == 4 + 3 * 2
    # Shard 1's descriptors (q:s1:...) read as partition 1's: room was made there first.
    assert len(lines) == 5 and "partition 1: 1 empty records" in lines[0]
    assert "imported" in lines[1]

    _project(my_store, kafka, prefix)
    assert [(q.name, q.partitions) for q in my_store.queues()] == [(pinlater, 2)]
    assert all(d is not None for d in new)
    parsed = [descriptor.parse(d) for d in new if d is not None]
    assert {d.partition for d in parsed} == {0}  # shard 1 is partition 0
    old = [f"{pinlater}:s1:p1:{local_id}" for local_id in range(1, len(ROWS) + 1)]
    assert my_store.imported(pinlater, old) == dict(zip(old, parsed, strict=True))
    # Shard 2's jobs went to partition 1 after the room: without it, the first would
    # have been q:s1:p1:0 and the second q:s1:p1:1, shard 1's first job's PinLater
    # descriptor. Every id of partition 1, imported or native, is above shard 1's.
    [native] = writer.enqueue(
        pinlater, 1, [Enqueued(b"native", 1, 0, 1)], 0, Actor("svc:native", "", "")
    )
    _project(my_store, kafka, prefix)
    partition_1 = my_store.partition_jobs(pinlater, 1)
    assert len(partition_1) == 2 * 2 + 1  # shard 2: two jobs of each priority
    assert min(partition_1) > len(ROWS) and native.local_id in partition_1
    assert my_store.imported(pinlater, [str(native)]) == {}
    found = {
        r.job.local_id: r.job
        for r in my_store.lookup(pinlater, [(d.partition, d.local_id) for d in parsed], True)
    }
    for row, d in zip(ROWS, parsed, strict=True):
        job = found[d.local_id]
        assert (job.state, job.attempts_allowed, job.attempts_remaining) == (
            row.state,
            row.allowed,
            row.remaining,
        ), row
        assert (job.custom_status, job.body, job.priority) == (row.status, row.body, 1), row
        if row.state is JobState.PENDING:
            assert job.run_after == row.run_after_s * 1000, row
        if row.state is JobState.IN_PROGRESS:
            assert job.claim == row.claim

    ends = kafka.end_offsets([(writer.topic(pinlater), p) for p in (0, 1)])
    source = PinLaterSource(stack_settings().mysql_dsn)
    try:
        again = run_import(source, writer, kafka, [pinlater], say=lines.append)
    finally:
        source.close()
    assert again.jobs == 0
    assert kafka.end_offsets([(writer.topic(pinlater), p) for p in (0, 1)]) == ends


def test_a_queue_whose_jobs_hold_pinlater_descriptors_is_refused(
    pinlater: str, writer: LedgerWriter, kafka: KafkaLog
) -> None:
    """Jobs enqueued into partition 1 before the import have the descriptors
    q:s1:p1:0..2; PinLater's shard 1 gave q:s1:p1:1 and 2 too: the two could not be
    told apart, so nothing is imported."""
    actor = Actor("svc:native", "", "")
    writer.create_queue(pinlater, 2, 0, actor)
    writer.enqueue(pinlater, 1, [Enqueued(b"n%d" % i, 1, 0, 1) for i in range(3)], 0, actor)
    source = PinLaterSource(stack_settings().mysql_dsn)
    try:
        with pytest.raises(ImportRefusedError, match=f"first: {pinlater}:s1:p1:1\\)"):
            run_import(source, writer, kafka, [pinlater], say=lambda _: None)
        first = source.shards([pinlater])[0]
        assert source.imported_as(first, 1, 1) is None
    finally:
        source.close()
    assert kafka.end_offset(writer.topic(pinlater), 0) == 0  # nothing imported
