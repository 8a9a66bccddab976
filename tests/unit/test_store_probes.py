"""What `/ready` probes of the projection store (service/assembly.py `store_probes`),
asked of the store and not of its type: one store by its kind, each store shard of a
shard map by kind and name, so a shard down is named."""

from __future__ import annotations

import pytest

from pinledger.projections.fake.store import FakeStore
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.store import StoreUnavailableError
from pinledger.service.assembly import store_probes


def test_one_store_is_probed_by_its_kind() -> None:
    store = FakeStore()
    store.migrate()
    probes = store_probes(store)
    assert list(probes) == ["postgres"]
    assert probes["postgres"]() == []


def test_each_store_shard_is_probed_under_its_name_and_a_shard_down_is_named() -> None:
    shards = {"a": FakeStore("a"), "b": FakeStore("b")}
    sharded = ShardedStore("p.", shards)
    try:
        sharded.migrate()
        assert list(store_probes(sharded)) == ["postgres:a", "postgres:b"]
        only_b = store_probes(sharded, only=["b"])
        assert list(only_b) == ["postgres:b"]
        shards["b"].fail()
        with pytest.raises(StoreUnavailableError, match="store shard 'b'"):
            only_b["postgres:b"]()
        assert store_probes(sharded)["postgres:a"]() == []
        shards["b"].recover()
    finally:
        sharded.close()
