"""The store's shard map (issue 23, part 1): PinLater-style JSON, parsed strictly with a
clear message for each mistake, never showing a password, re-read when it changes."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from pinledger.service.shards.shard_map import (
    DEFAULT_SHARD,
    Shard,
    ShardMap,
    ShardMapError,
    ShardMapWatcher,
    load_shard_map,
    parse_shard_map,
    single,
)

PG = "postgresql://app:s3cret@db-a:5432/ledger"
MY = "mysql://app:s3cret@db-b:3306/ledger"


def _doc(*shards: object) -> str:
    return json.dumps({"shards": list(shards)})


def test_a_map_of_mixed_stores_parses_in_order() -> None:
    shards = parse_shard_map(
        _doc({"name": "a", "dsn": PG}, {"name": "b-2", "dsn": MY, "dequeueOnly": True})
    )
    assert shards == ShardMap((Shard("a", PG), Shard("b-2", MY, dequeue_only=True)))
    assert [s.kind for s in shards.shards] == ["postgres", "mysql"]
    assert shards.writable == (Shard("a", PG),)
    assert shards.get("b-2") == Shard("b-2", MY, True)
    assert shards.get("c") is None


def test_without_a_map_the_one_store_is_the_default_shard() -> None:
    assert load_shard_map("", PG) == single(PG) == ShardMap((Shard(DEFAULT_SHARD, PG),))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("[", "not valid JSON"),
        ("[]", "must be a JSON object like"),
        (json.dumps({"shards": [], "x": 1}), "must be a JSON object like"),
        (json.dumps({"shards": []}), "non-empty list"),
        (_doc("a"), r"shards\[0\] must be an object"),
        (_doc({"name": "a", "dsn": PG, "weight": 2}), "unknown key 'weight'"),
        (_doc({"name": "A", "dsn": PG}), r"shards\[0\].name must be 1-64 characters"),
        (_doc({"dsn": PG}), r"shards\[0\].name must be"),
        (_doc({"name": "a", "dsn": "sqlite:///x"}), "dsn must be a postgresql:// or mysql://"),
        (_doc({"name": "a", "dsn": PG, "dequeueOnly": "yes"}), "dequeueOnly must be true or"),
        (_doc({"name": "a", "dsn": PG}, {"name": "a", "dsn": MY}), "'a' is listed twice"),
        (_doc({"name": "a", "dsn": PG, "dequeueOnly": True}), "every shard is dequeueOnly"),
    ],
)
def test_each_mistake_is_refused_saying_what_is_wrong(doc: str, message: str) -> None:
    with pytest.raises(ShardMapError, match=message):
        parse_shard_map(doc)


def test_no_error_or_repr_shows_a_password() -> None:
    with pytest.raises(ShardMapError) as refused:
        parse_shard_map(_doc({"name": "a", "dsn": "postgresq://app:s3cret@db-a/ledger"}))
    assert "s3cret" not in str(refused.value) and "app:***@db-a" in str(refused.value)
    assert "s3cret" not in repr(Shard("a", PG))
    assert "s3cret" not in repr(parse_shard_map(_doc({"name": "a", "dsn": PG})))


def test_an_unreadable_map_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ShardMapError, match=r"cannot read shard map .*missing\.json"):
        load_shard_map(str(tmp_path / "missing.json"), PG)


def test_the_map_is_re_read_and_a_broken_edit_keeps_the_last_good_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "shards.json"
    path.write_text(_doc({"name": "a", "dsn": PG}))
    seen: list[ShardMap] = []
    watcher = ShardMapWatcher(path, single(MY), seen.append)
    assert watcher.current.shards == (Shard("a", PG),)

    path.write_text(_doc({"name": "a", "dsn": PG}, {"name": "b", "dsn": MY}))
    os.utime(path, ns=(1, 1))  # a new mtime, whatever the clock's resolution
    assert watcher.check() is True
    assert [s.name for s in watcher.current.shards] == ["a", "b"]

    path.write_text(_doc({"name": "a", "dsn": PG}, {"name": "a", "dsn": MY}))
    os.utime(path, ns=(2, 2))
    with caplog.at_level(logging.WARNING):
        assert watcher.check() is False
    assert [s.name for s in watcher.current.shards] == ["a", "b"]
    assert "shard map" in caplog.text and "previous config stays in force" in caplog.text
    assert "s3cret" not in caplog.text
    assert [[s.name for s in m.shards] for m in seen] == [["a"], ["a", "b"]]


def test_without_a_file_the_watcher_holds_the_one_store() -> None:
    watcher = ShardMapWatcher(None, single(PG))
    assert watcher.current == single(PG)
    assert watcher.check() is False
