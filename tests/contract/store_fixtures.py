"""The `store` and `scratch` fixtures of every tier, parametrized by kind: a real
Postgres store (a fresh, migrated schema, dropped afterwards), a real MySQL store (a
fresh, migrated MariaDB database, dropped afterwards), a sharded store (a ShardedStore
over two fresh, migrated Postgres schemas, the store shards "a" and "b", dropped
afterwards) or the in-memory FakeStore.

Which kind is `store_kind`'s: Postgres by default; a test about the store runs on each
real store with `@each_kind`; the contract suite's conftest makes every test run on all
four (`ALL_KINDS`). A missing server fails the test with a message naming
`make stack-up`; it never skips it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pinledger.ledger.events import PartitionPlaced
from pinledger.projections.factory import open_store
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.mysql import schema as my_schema
from pinledger.projections.mysql.store import Store as MyStore
from pinledger.projections.pg import schema as pg_schema
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.store import LedgerStore, StoreError
from tests.settings import stack_settings

# The real stores.
KINDS = ("postgres", "mysql")
# The real stores, a ShardedStore over two real Postgres schemas and the FakeStore
# (which behaves as Postgres).
ALL_KINDS = (*KINDS, "sharded", "fake")
# The kinds whose rows a real Postgres holds (what Postgres refuses, they refuse).
ON_POSTGRES = ("postgres", "sharded")
# The topic prefix of the contract's records: the sharded store tells a queue's topic
# from the catalog's by it.
PREFIX = "contract."
# The store shards of the sharded kind, home first.
SHARDS = ("a", "b")

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
    if kind == "sharded":
        yield from _sharded(label)
        return
    real = fresh_store(kind, label)
    try:
        yield real
    finally:
        real.drop()


def _sharded(label: str) -> Iterator[LedgerStore]:
    shards: dict[str, LedgerStore] = {}
    try:
        for name in SHARDS:
            shards[name] = fresh_store("postgres", f"{label}_{name}")
        sharded = ShardedStore(PREFIX, shards)
    except BaseException:
        for shard in shards.values():
            shard.drop()
        raise
    try:
        yield sharded
    finally:
        try:
            sharded.drop()
        finally:
            sharded.close()


def place(store: LedgerStore, queue: str, partitions: int) -> list[PartitionPlaced]:
    """The placements a writer appends with a queue's creation on `store`: partition p on
    its store shard p + 1 modulo their number, so a sharded store's queues span its
    shards and a queue of one partition is on a shard other than home; none on a store
    that is one database (its partitions are all on it)."""
    names = list(store.shards())
    if len(names) < 2:
        return []
    return [
        PartitionPlaced(queue, p, names[(p + 1) % len(names)], "contract")
        for p in range(partitions)
    ]


@pytest.fixture
def store(store_kind: str) -> Iterator[LedgerStore]:
    """A fresh, migrated store of `store_kind`, dropped afterwards."""
    yield from _opened(store_kind, "store")


@pytest.fixture
def scratch(store_kind: str) -> Iterator[LedgerStore]:
    """A second fresh store of the same kind, for replays."""
    yield from _opened(store_kind, "scratch")
