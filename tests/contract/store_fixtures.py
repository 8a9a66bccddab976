"""The `store` and `scratch` fixtures of every tier, parametrized by kind: a real
Postgres store (a fresh, migrated schema, dropped afterwards), a real MySQL store (a
fresh, migrated MariaDB database, dropped afterwards) or the in-memory FakeStore.

Which kind is `store_kind`'s: Postgres by default; a test about the store runs on each
real store with `@each_kind`; the contract suite's conftest makes every test run on all
three (`ALL_KINDS`). A missing server fails the test with a message naming
`make stack-up`; it never skips it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pinledger.projections.factory import open_store
from pinledger.projections.mysql import schema as my_schema
from pinledger.projections.mysql.store import Store as MyStore
from pinledger.projections.pg import schema as pg_schema
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.testing.fake_store import FakeStore
from tests.settings import stack_settings

# The real stores.
KINDS = ("postgres", "mysql")
# The real stores and the FakeStore (which behaves as Postgres).
ALL_KINDS = (*KINDS, "fake")

# A test about the store: once on each real store (overrides `store_kind`).
each_kind = pytest.mark.parametrize("store_kind", KINDS)


def store_dsn(kind: str) -> str:
    """The DSN of the real store of a kind: "postgres" or "mysql"."""
    settings = stack_settings()
    return settings.mysql_dsn if kind == "mysql" else settings.pg_dsn


def fresh_store(kind: str, label: str, migrate: bool = True) -> LedgerStore:
    """A store on a fresh schema (Postgres) or database (MySQL) of the stack's server."""
    try:
        store = open_store(store_dsn(kind), f"{label}_{uuid.uuid4().hex[:10]}")
    except StoreError as exc:
        pytest.fail(f"{exc}\n(the {kind} side of this test needs the real server: `make stack-up`)")
    if migrate:
        store.migrate()
    return store


def fresh_pg_store(label: str, migrate: bool = True) -> PgStore:
    """A Postgres Store on a fresh schema of the Postgres the environment names."""
    store = fresh_store("postgres", label, migrate)
    assert isinstance(store, PgStore)
    return store


def describe(store: LedgerStore) -> Any:
    """The store's schema shape, by its kind's description (projections/*/schema.py)."""
    if isinstance(store, MyStore):
        return my_schema.describe(store)
    assert isinstance(store, PgStore)
    return pg_schema.describe(store)


def dialect(store: LedgerStore) -> str:
    """Whose regular expressions and byte rendering a store's body regexes use, as the
    store says (`kind`): "mysql" (MariaDB's PCRE2 on the body's bytes) or "postgres"
    (Postgres's regex on the body's escape encoding; the FakeStore behaves as Postgres)."""
    return store.kind


@pytest.fixture
def store_kind() -> str:
    """The kind of `store` and `scratch`: Postgres, unless the test or its folder says
    otherwise (`each_kind`, the contract suite's conftest)."""
    return "postgres"


def _opened(kind: str, label: str) -> Iterator[LedgerStore]:
    if kind == "fake":
        fake = FakeStore()
        fake.migrate()
        yield fake
        return
    real = fresh_store(kind, label)
    try:
        yield real
    finally:
        real.drop()


@pytest.fixture
def store(store_kind: str) -> Iterator[LedgerStore]:
    """A fresh, migrated store of `store_kind`, dropped afterwards."""
    yield from _opened(store_kind, "store")


@pytest.fixture
def scratch(store_kind: str) -> Iterator[LedgerStore]:
    """A second fresh store of the same kind, for replays."""
    yield from _opened(store_kind, "scratch")
