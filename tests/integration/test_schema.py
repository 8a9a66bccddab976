"""One truth in the schema: migrations/ applied to a fresh schema produce exactly the
canonical projections/pg/schema.sql."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
    assert {c[0] for c in expected.columns} == {"queues", "jobs", "job_events", "partition_offsets"}
    assert migrated.columns == expected.columns
    assert migrated.indexes == expected.indexes
    assert migrated.constraints == expected.constraints


def test_migrating_twice_changes_nothing(store: Store) -> None:
    before = describe(store)
    assert store.migrate() == []
    assert describe(store) == before
