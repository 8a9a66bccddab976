"""The `store` fixture of the contract suite: each test runs once on the real Postgres
adapter (a fresh, migrated schema, dropped afterwards) and once on the in-memory
FakeStore. A missing Postgres fails the test with a message; it never skips it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pinledger.projections.pg.store import Store
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.config import Config
from pinledger.service.testing.fake_store import FakeStore


def fresh_pg_store(label: str, migrate: bool = True) -> Store:
    """A Store on a fresh schema of the Postgres the environment names."""
    try:
        store = Store(Config.from_env().pg_dsn, f"{label}_{uuid.uuid4().hex[:10]}")
    except StoreError as exc:
        pytest.fail(
            f"{exc}\n(the Postgres side of this test needs the real server: `make stack-up`)"
        )
    if migrate:
        store.migrate()
    return store


@pytest.fixture(params=["postgres", "fake"])
def store(request: pytest.FixtureRequest) -> Iterator[LedgerStore]:
    if request.param == "postgres":
        real = fresh_pg_store("contract")
        try:
            yield real
        finally:
            real.drop()
    else:
        fake = FakeStore()
        fake.migrate()
        yield fake
