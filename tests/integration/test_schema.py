"""One truth in the schema: the migrations applied to a fresh schema produce exactly the
canonical schema, on each SQL store (migrations/ and projections/pg/schema.sql on
Postgres, migrations/mysql/ and projections/mysql/schema.sql on MariaDB); and the
Postgres migrations that converted data convert it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pinledger.ledger.codec import EVENT_TAGS
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Cancelled
from pinledger.projections.actions import EVENT_TYPES
from pinledger.projections.day_partitions import DayPartition
from pinledger.projections.history import build_history
from pinledger.projections.mysql import schema as my_schema
from pinledger.projections.mysql.store import Store as MyStore
from pinledger.projections.pg import schema as pg_schema
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections.store import LedgerStore
from tests.contract.store_fixtures import describe, each_kind, fresh_pg_store, fresh_store

pytestmark = pytest.mark.integration


@pytest.fixture
def canonical(store_kind: str) -> Iterator[LedgerStore]:
    """A fresh schema (database) of `store_kind` holding its schema.sql, not migrated."""
    fresh = fresh_store(store_kind, "canonical", migrate=False)
    try:
        if isinstance(fresh, MyStore):
            my_schema.create_canonical(fresh)
        else:
            assert isinstance(fresh, PgStore)
            pg_schema.create_canonical(fresh)
        yield fresh
    finally:
        fresh.drop()


@each_kind
def test_migrations_produce_the_canonical_schema(
    store: LedgerStore, canonical: LedgerStore
) -> None:
    migrated, expected = describe(store), describe(canonical)
    assert {c[0] for c in expected.columns} == {
        "queues",
        "partition_placements",
        "skipped_records",
        "schedule_ticks",
        "jobs",
        "job_events",
        "imported_descriptors",
        "ended_sessions",
        "partition_offsets",
    }
    assert migrated.columns == expected.columns
    assert migrated.indexes == expected.indexes
    assert migrated.constraints == expected.constraints
    if store.kind == "mysql":
        # MariaDB's partitioning is not in its constraints: compared on its own.
        assert migrated.partitioning == expected.partitioning == [("job_events", "RANGE", "`at`")]


@each_kind
def test_migrating_twice_changes_nothing(store: LedgerStore) -> None:
    before = describe(store)
    assert store.migrate() == []
    assert describe(store) == before


# Rows as pinledger wrote them before migration 0003: the event's Python class name.
_LEGACY_EVENT = """
    INSERT INTO job_events (queue, partition, local_id, "offset", idx, type, at, source,
                            request_id, server, applied, verdict, detail)
    VALUES ('q', 0, 0, %(offset)s, 0, %(type)s, 0, '', '', '', true, 'applied', '{}')
"""


# The job event types the early migrations knew: Cancelled came with 0017.
_BEFORE_0017 = [cls for cls in EVENT_TYPES.values() if cls is not Cancelled]


def test_postgres_migration_0003_turns_class_names_into_codec_tags() -> None:
    """Postgres only: its migration 0003 converted rows (MySQL started after it)."""
    legacy = fresh_pg_store("legacy", migrate=False)
    try:
        assert legacy.migrate(upto=2) == ["0001_initial.sql", "0002_finished_index.sql"]
        kinds = _BEFORE_0017
        with legacy.dialect.connection("writing legacy rows") as conn:
            for offset, cls in enumerate(kinds):
                conn.execute(_LEGACY_EVENT, {"offset": offset, "type": cls.__name__})
        # 0003 blocks writes to job_events: a schema in use runs it only when allowed.
        assert legacy.migrate(upto=3, allow_pause=True) == ["0003_event_tags_drop_epoch.sql"]
        rows = legacy.job_events("q", 0, 0)
        assert [row.type for row in rows] == [EVENT_TAGS[cls] for cls in kinds]
        assert [step.action for step in build_history(JobDescriptor("q", 0, 1, 0), rows).steps] == [
            cls.__name__ for cls in kinds
        ]
    finally:
        legacy.drop()


def test_postgres_migration_0004_moves_the_timeline_into_day_partitions() -> None:
    """Postgres only: its migration 0004 partitioned an existing timeline (MySQL started
    partitioned)."""
    legacy = fresh_pg_store("legacy", migrate=False)
    day = 86_400_000
    try:
        legacy.migrate(upto=3)
        kinds = _BEFORE_0017
        with legacy.dialect.connection("writing rows of an unpartitioned timeline") as conn:
            for offset, cls in enumerate(kinds):
                conn.execute(
                    _TAGGED_EVENT,
                    {"offset": offset, "type": EVENT_TAGS[cls], "at": offset * day // 3},
                )
        assert legacy.migrate(upto=4, allow_pause=True) == ["0004_partition_job_events.sql"]
        rows = legacy.job_events("q", 0, 0)
        assert [(row.type, row.at) for row in rows] == [
            (EVENT_TAGS[cls], offset * day // 3) for offset, cls in enumerate(kinds)
        ]
        days = {offset * day // 3 // day for offset in range(len(kinds))}
        assert legacy.day_partitions() == [
            DayPartition(d * day, (d + 1) * day) for d in sorted(days)
        ]
        assert [p.name for p in legacy.day_partitions()][:2] == [
            "job_events_p19700101",
            "job_events_p19700102",
        ]
    finally:
        legacy.drop()


_TAGGED_EVENT = """
    INSERT INTO job_events (queue, partition, local_id, "offset", idx, type, at, source,
                            request_id, server, applied, verdict, detail)
    VALUES ('q', 0, 0, %(offset)s, 0, %(type)s, %(at)s, '', '', '', true, 'applied', '{}')
"""
