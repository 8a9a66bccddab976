"""One truth in the MySQL schema: migrations/mysql/ applied to a fresh database produce
exactly the canonical projections/mysql/schema.sql (as test_schema.py checks for
Postgres)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pinledger.projections.mysql.schema import create_canonical, describe
from pinledger.projections.mysql.store import Store as MyStore
from tests.contract.store_fixtures import fresh_store

pytestmark = pytest.mark.integration


def _fresh(label: str, migrate: bool) -> MyStore:
    store = fresh_store("mysql", label, migrate)
    assert isinstance(store, MyStore)
    return store


@pytest.fixture
def migrated() -> Iterator[MyStore]:
    store = _fresh("migrated", migrate=True)
    yield store
    store.drop()


@pytest.fixture
def canonical() -> Iterator[MyStore]:
    """A fresh database holding schema.sql, not migrated."""
    store = _fresh("canonical", migrate=False)
    try:
        create_canonical(store)
        yield store
    finally:
        store.drop()


def test_migrations_produce_the_canonical_schema(migrated: MyStore, canonical: MyStore) -> None:
    got, expected = describe(migrated), describe(canonical)
    assert {c[0] for c in expected.columns} == {
        "queues",
        "jobs",
        "job_events",
        "imported_descriptors",
        "partition_offsets",
    }
    assert got.columns == expected.columns
    assert got.indexes == expected.indexes
    assert got.constraints == expected.constraints
    assert got.partitioning == expected.partitioning == [("job_events", "RANGE", "`at`")]


def test_migrating_twice_changes_nothing(migrated: MyStore) -> None:
    before = describe(migrated)
    assert migrated.migrate() == []
    assert describe(migrated) == before
