"""One truth in the schema: migrations/ applied to a fresh schema produce exactly the
canonical projections/pg/schema.sql."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pinledger.ledger.codec import EVENT_TAGS
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import QueueCreated, QueueDeleted
from pinledger.projections.day_partitions import DayPartition
from pinledger.projections.history import build_history
from pinledger.projections.pg.schema import create_canonical, describe
from pinledger.projections.pg.store import Store
from tests.contract.store_fixtures import fresh_pg_store

pytestmark = pytest.mark.integration


@pytest.fixture
def canonical() -> Iterator[Store]:
    """A fresh schema holding schema.sql, not migrated."""
    fresh = fresh_pg_store("canonical", migrate=False)
    try:
        create_canonical(fresh)
        yield fresh
    finally:
        fresh.drop()


def test_migrations_produce_the_canonical_schema(store: Store, canonical: Store) -> None:
    migrated, expected = describe(store), describe(canonical)
    assert {c[0] for c in expected.columns} == {
        "queues",
        "jobs",
        "job_events",
        "imported_descriptors",
        "partition_offsets",
    }
    assert migrated.columns == expected.columns
    assert migrated.indexes == expected.indexes
    assert migrated.constraints == expected.constraints


def test_migrating_twice_changes_nothing(store: Store) -> None:
    before = describe(store)
    assert store.migrate() == []
    assert describe(store) == before


# Rows as pinledger wrote them before migration 0003: the event's Python class name.
_LEGACY_EVENT = """
    INSERT INTO job_events (queue, partition, local_id, "offset", idx, type, at, source,
                            request_id, server, applied, verdict, detail)
    VALUES ('q', 0, 0, %(offset)s, 0, %(type)s, 0, '', '', '', true, 'applied', '{}')
"""


def test_migration_0003_turns_class_names_into_codec_tags() -> None:
    legacy = fresh_pg_store("legacy", migrate=False)
    try:
        assert legacy.migrate(upto=2) == ["0001_initial.sql", "0002_finished_index.sql"]
        kinds = [cls for cls in EVENT_TAGS if cls not in (QueueCreated, QueueDeleted)]
        with legacy.dialect.connection("writing legacy rows") as conn:
            for offset, cls in enumerate(kinds):
                conn.execute(_LEGACY_EVENT, {"offset": offset, "type": cls.__name__})
        assert legacy.migrate(upto=3) == ["0003_event_tags_drop_epoch.sql"]
        rows = legacy.job_events("q", 0, 0)
        assert [row.type for row in rows] == [EVENT_TAGS[cls] for cls in kinds]
        assert [step.action for step in build_history(JobDescriptor("q", 0, 1, 0), rows).steps] == [
            cls.__name__ for cls in kinds
        ]
    finally:
        legacy.drop()


def test_migration_0004_moves_the_timeline_into_day_partitions() -> None:
    legacy = fresh_pg_store("legacy", migrate=False)
    day = 86_400_000
    try:
        legacy.migrate(upto=3)
        kinds = [cls for cls in EVENT_TAGS if cls not in (QueueCreated, QueueDeleted)]
        with legacy.dialect.connection("writing rows of an unpartitioned timeline") as conn:
            for offset, cls in enumerate(kinds):
                conn.execute(
                    _TAGGED_EVENT,
                    {"offset": offset, "type": EVENT_TAGS[cls], "at": offset * day // 3},
                )
        assert legacy.migrate(upto=4) == ["0004_partition_job_events.sql"]
        rows = legacy.job_events("q", 0, 0)
        assert [(row.type, row.at) for row in rows] == [
            (EVENT_TAGS[cls], offset * day // 3) for offset, cls in enumerate(kinds)
        ]
        days = {offset * day // 3 // day for offset in range(len(kinds))}
        assert legacy.history_partitions() == [
            DayPartition(d * day, (d + 1) * day) for d in sorted(days)
        ]
        assert [p.name for p in legacy.history_partitions()][:2] == [
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
