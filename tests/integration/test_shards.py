"""The store's shard map on real stores (issue 23, part 1): `pinledger migrate` migrates
every shard of a map that mixes Postgres and MariaDB, `pinledger shards` says each is
healthy, and names an unreachable or unmigrated one with what to do, never showing a
password."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinledger.projections.factory import open_store
from pinledger.service.testing.servers import run_pinledger
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

PASSWORD = "pinledger"  # the stack's, in both DSNs


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"shards_{uuid.uuid4().hex[:10]}"
    yield name
    settings = stack_settings()
    for dsn in (settings.pg_dsn, settings.mysql_dsn):
        store = open_store(dsn, name)
        try:
            store.drop()
        finally:
            store.close()


def _cli(path: str, schema: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pinledger(*args, PINLEDGER_STORE_SHARDS=path, PINLEDGER_SCHEMA=schema)


def _map(tmp_path: Path, *shards: tuple[str, str]) -> str:
    path = tmp_path / "shards.json"
    path.write_text(json.dumps({"shards": [{"name": n, "dsn": d} for n, d in shards]}))
    return str(path)


def test_migrate_and_health_cover_every_shard_of_a_mixed_map(tmp_path: Path, schema: str) -> None:
    settings = stack_settings()
    path = _map(tmp_path, ("a", settings.pg_dsn), ("b", settings.mysql_dsn))

    before = _cli(path, schema, "shards")
    assert before.returncode == 1, before.stdout + before.stderr
    assert before.stdout.count("pending: run `pinledger migrate`") == 2

    done = _cli(path, schema, "migrate")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("shard a (postgres, postgresql://pinledger:***@")
    b = next(i for i, line in enumerate(lines) if line.startswith("shard b (mysql, mysql://"))
    assert any(line.startswith("applied 0001_initial.sql") for line in lines[1:b])
    assert any(line.startswith("applied 0001_initial.sql") for line in lines[b:])
    again = _cli(path, schema, "migrate", "--check")
    assert again.returncode == 0 and again.stdout.count("up to date") == 2, again.stdout

    healthy = _cli(path, schema, "shards")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    rows = healthy.stdout.splitlines()[1:]
    assert [row.split()[:3] for row in rows] == [["a", "postgres", "yes"], ["b", "mysql", "yes"]]
    assert all(row.endswith("healthy") for row in rows)
    assert f":{PASSWORD}@" not in healthy.stdout + done.stdout + again.stdout


def test_an_unreachable_shard_is_named_and_the_exit_status_says_so(
    tmp_path: Path, schema: str
) -> None:
    settings = stack_settings()
    gone = f"postgresql://pinledger:{PASSWORD}@127.0.0.1:1/pinledger"
    path = _map(tmp_path, ("a", settings.pg_dsn), ("gone", gone))
    assert _cli(path, schema, "migrate").returncode != 0  # "gone" cannot be migrated
    listed = _cli(path, schema, "shards")
    assert listed.returncode == 1
    (row,) = [r for r in listed.stdout.splitlines() if r.startswith("gone ")]
    assert "unreachable" in row
    assert f":{PASSWORD}@" not in listed.stdout + listed.stderr


def test_a_broken_map_is_refused_with_its_mistake(tmp_path: Path, schema: str) -> None:
    path = tmp_path / "shards.json"
    path.write_text(json.dumps({"shards": [{"name": "a", "dsn": "sqlite:///x"}]}))
    refused = run_pinledger("migrate", PINLEDGER_STORE_SHARDS=str(path), PINLEDGER_SCHEMA=schema)
    assert refused.returncode == 2
    assert "dsn must be a postgresql:// or mysql:// URL" in refused.stderr
