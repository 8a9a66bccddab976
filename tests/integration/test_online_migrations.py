"""Migrations while servers serve (docs/decisions/0024-online-migrations.md), on the
real Postgres and MariaDB: `migrate --check` says what a run would do and changes
nothing; a run stops before a migration that needs a pause; an index an interrupted
concurrent build left INVALID is built again; and the ready-window indexes of 0005 are
built on a populated `jobs` while writes go on, where the plain CREATE INDEX they
replaced stops them; and the same migration runs on a schema a real server serves under
load, with no call failing."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from pinledger.cli.main import main
from pinledger.cli.migrate import EXIT_NEEDS_PAUSE
from pinledger.idl import pinlater
from pinledger.ledger.kafka import KafkaLog
from pinledger.projections.factory import open_store
from pinledger.projections.migration_plan import PauseNeededError
from pinledger.projections.mysql.sql import migrations as my_migrations
from pinledger.projections.mysql.sql import query as my_query
from pinledger.projections.mysql.store import Store as MyStore
from pinledger.projections.pg.sql import migrations as pg_migrations
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections.store import LedgerStore
from pinledger.service.testing.servers import ServerProcess, context, run_pinledger, wait_for
from tests.chaos.load import Load
from tests.contract.store_fixtures import (
    describe,
    each_kind,
    fresh_pg_store,
    fresh_store,
    store_dsn,
)
from tests.integration.conftest import server_settings
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

# Rows of `jobs` the index builds run over: enough that a build is work, inserted by SQL.
POPULATION = 40_000
# A writer's patience for a lock: a write that waits this long failed the test. Any
# wait behind a plain CREATE INDEX lasts until the open transaction ends (never, here),
# so the bound only has to be above a write's own time.
LOCK_TIMEOUT = "300ms"
# Jobs a served schema holds before its migration runs, enqueued through the server.
SERVED_POPULATION = 20_000


@pytest.fixture
def dropped() -> Iterator[list[LedgerStore]]:
    """Stores a test made, dropped afterwards."""
    stores: list[LedgerStore] = []
    yield stores
    for store in stores:
        store.drop()


def _cli(
    store: LedgerStore,
    *args: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    """`pinledger migrate ARGS` on the store's schema: exit code, stdout, stderr."""
    assert isinstance(store, PgStore | MyStore)
    monkeypatch.setenv("PINLEDGER_STORE_DSN", store.dsn)
    monkeypatch.setenv("PINLEDGER_SCHEMA", store.schema)
    code = main(["migrate", *args])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def _pg(store: PgStore) -> psycopg.Connection:
    """A session of the test's own on the store's schema, in autocommit."""
    return psycopg.connect(store.dsn, autocommit=True, options=f"-c search_path={store.schema}")


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.02)


def _applied(store: PgStore) -> list[int]:
    with _pg(store) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]


def _at_0004(dropped: list[LedgerStore], jobs: int = 0) -> PgStore:
    """A Postgres schema migrated up to 0004 (a new schema runs its pauses), holding
    `jobs` rows of queue "bulk": a third PENDING, the rest SUCCEEDED."""
    store = fresh_pg_store("online", migrate=False)
    dropped.append(store)
    store.migrate(upto=4)
    if jobs:
        with _pg(store) as conn:
            conn.execute(
                """
                INSERT INTO jobs (queue, partition, local_id, priority, state, body,
                                  attempts_allowed, attempts_remaining, custom_status,
                                  created_at, run_after, updated_at)
                SELECT 'bulk', i %% 8, i, 1 + i %% 3, CASE WHEN i %% 3 = 0 THEN 0 ELSE 2 END,
                       ''::bytea, 1, 1, '', i, i, i
                FROM generate_series(1, %(n)s) AS i
                """,
                {"n": jobs},
            )
    return store


# --- migrate --check ------------------------------------------------------------------


@each_kind
def test_check_on_a_new_schema_lists_every_migration_and_blocks_nothing(
    store_kind: str,
    dropped: list[LedgerStore],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = fresh_store(store_kind, "check", migrate=False)
    dropped.append(store)
    shipped = pg_migrations() if store_kind == "postgres" else my_migrations()

    code, out, _ = _cli(store, "--check", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0
    listed = [line.strip().split(":")[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == [m.name for m in shipped]
    assert "a new schema" in out
    # Nothing was run, not even the migration runner's own table.
    assert store.migration_plan().new_schema
    assert len(store.migration_plan().pending) == len(shipped)

    assert store.migrate() == [m.name for m in shipped]
    code, out, _ = _cli(store, "--check", monkeypatch=monkeypatch, capsys=capsys)
    assert (code, out.strip()) == (0, f"schema {store.schema} ({store_kind}): up to date")


def test_check_on_a_schema_in_use_names_the_pause_and_changes_nothing(
    dropped: list[LedgerStore],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = _at_0004(dropped, jobs=1000)
    before, applied = describe(store), _applied(store)

    code, out, _ = _cli(store, "--check", monkeypatch=monkeypatch, capsys=capsys)
    assert code == EXIT_NEEDS_PAUSE
    assert [line.strip() for line in out.splitlines()[1:7]] == [
        "0005_ready_window.sql: concurrently (outside a transaction; writes go on)",
        "0006_job_events_by_type.sql: needs a pause: indexes the partitioned job_events, "
        "which Postgres cannot index concurrently: writes to job_events wait for the whole "
        "build",
        "0007_imported_descriptors.sql: online (brief locks only)",
        "0008_ended_sessions.sql: online (brief locks only)",
        "0009_queue_open_partitions.sql: online (brief locks only)",
        "0010_queue_retired_partitions.sql: online (brief locks only)",
    ]
    assert "0006_job_events_by_type.sql would block writes" in out
    assert "pinledger migrate --allow-pause" in out
    assert describe(store) == before
    assert _applied(store) == applied


def test_check_on_mariadb_in_use_blocks_nothing_and_changes_nothing(
    dropped: list[LedgerStore],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = fresh_store("mysql", "check", migrate=False)
    dropped.append(store)
    assert isinstance(store, MyStore)
    store.migrate(upto=1)
    before = describe(store)

    code, out, _ = _cli(store, "--check", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0
    assert "  0002_imported_descriptors.sql: online (brief locks only)" in out.splitlines()
    assert "none blocks writes" in out
    assert describe(store) == before


def test_check_answers_while_another_process_migrates(dropped: list[LedgerStore]) -> None:
    """`--check` takes no lock: it answers while a long concurrent build holds it."""
    store = _at_0004(dropped)
    with _pg(store) as migrating:
        migrating.execute("SELECT pg_advisory_lock(hashtext(current_schema()))")
        answers: list[int] = []
        asking = threading.Thread(
            target=lambda: answers.append(len(store.migration_plan().pending)), daemon=True
        )
        asking.start()
        asking.join(timeout=60)
        assert answers == [len(pg_migrations()) - 4]  # those after 0004


@each_kind
def test_two_processes_migrating_a_new_schema_at_once_both_succeed(
    store_kind: str, dropped: list[LedgerStore]
) -> None:
    """Servers started together each migrate the new schema: one waits for the other
    and finds nothing left to do. (On Postgres a waiter blocked on the lock held a
    snapshot that the other's CREATE INDEX CONCURRENTLY waited for: a deadlock, and one
    server exited at start.)"""
    first = fresh_store(store_kind, "together", migrate=False)
    dropped.append(first)
    second = open_store(store_dsn(store_kind), first.schema)
    try:
        start = threading.Barrier(2)
        applied: list[list[str]] = []
        failed: list[BaseException] = []

        def migrate(store: LedgerStore) -> None:
            start.wait()
            try:
                applied.append(store.migrate())
            except BaseException as exc:  # the test reports it
                failed.append(exc)

        runs = [threading.Thread(target=migrate, args=(s,), daemon=True) for s in (first, second)]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
        assert not failed, failed
        every = pg_migrations() if store_kind == "postgres" else my_migrations()
        assert sorted(applied, key=len) == [[], [m.name for m in every]]
    finally:
        second.close()


# --- a run that reaches a pause ---------------------------------------------------------


def test_migrate_stops_before_a_pause_and_says_what_to_do(
    dropped: list[LedgerStore],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = _at_0004(dropped, jobs=1000)

    code, out, err = _cli(store, monkeypatch=monkeypatch, capsys=capsys)
    assert code == EXIT_NEEDS_PAUSE
    assert out.startswith("applied 0005_ready_window.sql (concurrently) in ")
    assert "migration 0006_job_events_by_type.sql needs a pause: " in err
    assert "Stop every server of this schema, then run `pinledger migrate --allow-pause`" in err
    assert _applied(store) == [1, 2, 3, 4, 5]

    code, out, _ = _cli(store, "--allow-pause", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0
    assert [line.split(" in ")[0] for line in out.splitlines()] == [
        "applied 0006_job_events_by_type.sql (pause)",
        "applied 0007_imported_descriptors.sql (online)",
        "applied 0008_ended_sessions.sql (online)",
        "applied 0009_queue_open_partitions.sql (online)",
        "applied 0010_queue_retired_partitions.sql (online)",
        "applied 0011_partition_placements.sql (online)",
        "applied 0012_imported_by_partition.sql (concurrently)",
        "applied 0013_skipped_records.sql (online)",
        "applied 0014_queue_paused.sql (online)",
        "applied 0015_jobs_unique_key.sql (online)",
        "applied 0016_jobs_by_key.sql (concurrently)",
        "applied 0017_cancelled_event_type.sql (online)",
        "applied 0018_schedule_ticks.sql (online)",
        f"schema {store.schema}: 13 applied",
    ]
    # The same schema as a new one migrated in one run.
    fresh = fresh_pg_store("online_fresh")
    dropped.append(fresh)
    assert describe(store) == describe(fresh)


# --- an interrupted concurrent build ----------------------------------------------------


def _index(store: PgStore, name: str) -> tuple[bool, str] | None:
    """(valid, definition) of an index of the store's schema, or None."""
    with _pg(store) as conn:
        row = conn.execute(
            """
            SELECT x.indisvalid, pg_get_indexdef(x.indexrelid)
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_namespace n ON n.oid = i.relnamespace
            WHERE n.nspname = current_schema() AND i.relname = %(name)s
            """,
            {"name": name},
        ).fetchone()
    return None if row is None else (row[0], row[1])


def test_an_index_an_interrupted_build_left_invalid_is_built_again(
    dropped: list[LedgerStore],
) -> None:
    store = _at_0004(dropped, jobs=30)
    # A concurrent build that fails half way leaves its index in the catalog, INVALID,
    # as an interrupted `migrate` does: here a unique build meeting duplicates.
    with _pg(store) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_ready ON jobs (queue) WHERE state = 0")
    left = _index(store, "jobs_ready")
    assert left is not None and left[0] is False

    assert store.migrate(upto=5) == ["0005_ready_window.sql"]

    fresh = fresh_pg_store("online_fresh")
    dropped.append(fresh)
    for name in ("jobs_ready", "jobs_claimed"):
        built, canonical = _index(store, name), _index(fresh, name)
        assert built is not None and canonical is not None
        assert built[0] is True
        assert built[1].replace(store.schema, "S") == canonical[1].replace(fresh.schema, "S")


# --- the indexes of 0005 on a populated jobs, while writes go on ---------------------------


class Writer:
    """Writes to `jobs` on a session of its own that waits at most LOCK_TIMEOUT for a
    lock: inserts of new jobs and updates of populated ones, counted; the errors kept.
    Two writers update rows of their own (even or odd `parity`), never row 1 (the open
    transaction's), so no write waits for another's row."""

    def __init__(self, store: PgStore, first_id: int, parity: int = 0) -> None:
        self.conn = _pg(store)
        self.conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        self.next_id = first_id
        self.parity = parity
        self.inserted = 0
        self.errors: list[Exception] = []

    def write(self) -> None:
        try:
            self.conn.execute(
                """
                INSERT INTO jobs (queue, partition, local_id, priority, state, body,
                                  attempts_allowed, attempts_remaining, custom_status,
                                  created_at, run_after, updated_at)
                VALUES ('live', 0, %(id)s, 1, 0, ''::bytea, 1, 1, '', 0, 0, 0)
                """,
                {"id": self.next_id},
            )
            self.next_id += 1
            self.inserted += 1
            self.conn.execute(
                "UPDATE jobs SET updated_at = updated_at + 1 "
                "WHERE queue = 'bulk' AND local_id = %(id)s",
                {"id": 2 + 2 * (self.next_id % (POPULATION // 2 - 1)) + self.parity},
            )
        except psycopg.Error as exc:
            self.errors.append(exc)

    def close(self) -> None:
        self.conn.close()


def _open_writer_transaction(store: PgStore) -> psycopg.Connection:
    """A session holding an open transaction that wrote to jobs (a server's projection
    mid-commit, a slow client): what an index build must wait for."""
    conn = psycopg.connect(store.dsn, options=f"-c search_path={store.schema}")
    conn.execute("UPDATE jobs SET updated_at = updated_at + 1 WHERE local_id = 1")
    return conn


def _waits_behind_the_writer(store: PgStore, statement: str) -> Callable[[], bool]:
    """Whether a session running `statement` on the store's jobs waits on a lock."""

    def waiting() -> bool:
        with _pg(store) as conn:
            row = conn.execute(
                """
                SELECT count(*) FROM pg_stat_activity a
                WHERE a.wait_event_type = 'Lock' AND a.query ILIKE %(statement)s
                  AND EXISTS (SELECT 1 FROM pg_locks l
                              WHERE l.pid = a.pid AND l.relation = 'jobs'::regclass)
                """,
                {"statement": f"%{statement}%"},
            ).fetchone()
        return bool(row and row[0])

    return waiting


def test_the_ready_window_indexes_build_on_a_populated_table_while_writes_go_on(
    dropped: list[LedgerStore],
) -> None:
    store = _at_0004(dropped, jobs=POPULATION)
    holder = _open_writer_transaction(store)
    steady = Writer(store, first_id=1_000_000)
    stop = threading.Event()

    def write_steadily() -> None:
        while not stop.is_set():
            steady.write()

    outcome: list[BaseException | list[str]] = []

    def migrate() -> None:
        try:
            outcome.append(store.migrate())
        except BaseException as exc:  # the test asserts on it
            outcome.append(exc)

    writing = threading.Thread(target=write_steadily)
    migrating = threading.Thread(target=migrate)
    writing.start()
    migrating.start()
    burst = Writer(store, first_id=2_000_000, parity=1)
    try:
        # The build waits for the open transaction (CONCURRENTLY waits, never fails)...
        _wait_until(
            _waits_behind_the_writer(store, "CREATE INDEX"),
            "the index build waits for the open transaction",
        )
        # ...and while it waits, writes to jobs take no lock it holds.
        for _ in range(200):
            burst.write()
        assert burst.errors == []
        assert migrating.is_alive() and not outcome
    finally:
        holder.commit()
        holder.close()
        migrating.join(timeout=300)
        stop.set()
        writing.join(timeout=60)
        steady.close()
        burst.close()

    # The run built 0005 and stopped before 0006, which needs a pause.
    [result] = outcome
    assert isinstance(result, PauseNeededError)
    assert result.migration.name == "0006_job_events_by_type.sql"
    assert _applied(store) == [1, 2, 3, 4, 5]
    for name in ("jobs_ready", "jobs_claimed"):
        built = _index(store, name)
        assert built is not None and built[0] is True, name
    assert steady.errors == []
    assert steady.inserted > 0
    with _pg(store) as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None
    assert row[0] == POPULATION + steady.inserted + burst.inserted


def test_a_plain_create_index_would_have_stopped_the_writes(
    dropped: list[LedgerStore],
) -> None:
    """The control of the test above: 0005 as it was (a plain CREATE INDEX), in the same
    situation, makes a writer wait past its lock timeout."""
    store = _at_0004(dropped, jobs=1000)
    holder = _open_writer_transaction(store)
    plain = "CREATE INDEX jobs_ready ON jobs (queue, partition, priority, run_after, local_id)"

    def build() -> None:
        with _pg(store) as conn:
            conn.execute(plain + " WHERE state = 0")

    building = threading.Thread(target=build)
    building.start()
    writer = Writer(store, first_id=1_000_000)
    try:
        _wait_until(
            _waits_behind_the_writer(store, "CREATE INDEX jobs_ready"),
            "the plain build waits for the open transaction",
        )
        writer.write()
        assert len(writer.errors) == 1
        assert isinstance(writer.errors[0], psycopg.errors.LockNotAvailable)
    finally:
        holder.commit()
        holder.close()
        building.join(timeout=300)
        writer.close()


# --- MariaDB: a run interrupted between two statements -------------------------------------


def test_an_interrupted_mariadb_migration_completes_when_run_again(
    dropped: list[LedgerStore],
) -> None:
    """MariaDB commits each DDL statement: a run interrupted inside 0001 left some of its
    tables; the next run makes the others (IF NOT EXISTS) and records it."""
    store = fresh_store("mysql", "rerun", migrate=False)
    dropped.append(store)
    assert isinstance(store, MyStore)
    first = my_migrations()[0]
    with store.dialect.cursor("interrupting a migration") as cur:
        cur.execute(my_query("create_migrations_table"))
        for statement in first.statements[:2]:
            cur.execute(statement)

    assert store.migrate() == [m.name for m in my_migrations()]

    fresh = fresh_store("mysql", "rerun_fresh")
    dropped.append(fresh)
    assert describe(store) == describe(fresh)


# --- a real server serving while the migration runs ------------------------------------


def test_a_migration_runs_on_a_populated_schema_while_a_server_serves_it(
    kafka: KafkaLog, tmp_path: Path
) -> None:
    """0005 undone on a schema a server serves, holding tens of thousands of jobs; then
    `pinledger migrate` builds its indexes again while the server takes enqueues,
    dequeues and acks. No call fails, the load goes on through the build, nothing
    acknowledged is lost, and the indexes are valid."""
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"mig{tag}.", f"mig_{tag}"
    settings = server_settings(PINLEDGER_PARTITIONS="4")
    server = ServerProcess(prefix=prefix, schema=schema, settings=settings)
    store = PgStore(stack_settings().pg_dsn, schema)
    try:
        server.start(tmp_path)
        client = server.client()
        client.createQueue(context(), "bulk")
        for start in range(0, SERVED_POPULATION, 1000):
            jobs = [pinlater.PinLaterJob(body=b"b%d" % i) for i in range(start, start + 1000)]
            client.enqueueJobs(
                context(), pinlater.PinLaterEnqueueRequest(queueName="bulk", jobs=jobs)
            )
        counted = pinlater.PinLaterGetJobCountRequest(
            queueName="bulk", jobState=pinlater.PinLaterJobState.PENDING
        )
        wait_for(lambda: client.getJobCount(context(), counted) == SERVED_POPULATION, 60)
        client.close()
        with _pg(store) as conn:  # as if the schema were from before 0005
            conn.execute("DROP INDEX jobs_ready")
            conn.execute("DROP INDEX jobs_claimed")
            conn.execute("DELETE FROM schema_migrations WHERE version = 5")
        created = server.client()
        created.createQueue(context(), "served")
        created.close()
        with Load([server], "served", workers=2) as load:
            wait_for(lambda: len(load.record.runs) >= 20, 60)
            done = run_pinledger("migrate", PINLEDGER_SCHEMA=schema)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "0005_ready_window.sql" in done.stdout
            before = len(load.record.runs)
            wait_for(lambda: len(load.record.runs) >= before + 20, 60)
            load.stop_producing()
            checker = server.client()
            try:
                wait_for(lambda: not load.unfinished(checker), 120, 1.0)
            finally:
                checker.close()
        assert load.record.failures == [], load.record.failures[:5]
        ready, claimed = _index(store, "jobs_ready"), _index(store, "jobs_claimed")
        assert ready is not None and ready[0], ready
        assert claimed is not None and claimed[0], claimed
        assert 5 in _applied(store)
    finally:
        server.stop()
        store.drop()
        for topic in kafka.topics():
            if topic.startswith(prefix):
                kafka.delete_topic(topic)
