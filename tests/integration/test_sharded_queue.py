"""A queue spread over two store shards on real servers (issue 23, parts 2-4): two
Postgres databases, then Postgres and MariaDB. Two servers share the shard map; the
queue's partitions are placed on both shards by catalog records; jobs enqueued,
dequeued and acked under load land each in its partition's shard and nowhere else;
counts and scans see every job once across the shards, with keyset continuations; and
`pinledger replay` verifies the log against every shard."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.client.jobs import JobState
from pinledger.ledger.descriptor import parse
from pinledger.ledger.log import Log
from pinledger.projections.factory import open_store
from pinledger.projections.pg.databases import sibling_database
from pinledger.projections.store import JobFilter, LedgerStore
from pinledger.service.testing.servers import ServerProcess, run_pinledger, running, wait_for
from tests.integration.conftest import server_settings
from tests.integration.test_resize import Load
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

SECOND_DB = "pinledger_shard_b"


@pytest.fixture(params=["two-postgres", "postgres-mariadb"])
def shard_dsns(request: pytest.FixtureRequest) -> tuple[str, str]:
    settings = stack_settings()
    if request.param == "two-postgres":
        return settings.pg_dsn, sibling_database(settings.pg_dsn, SECOND_DB)
    return settings.pg_dsn, settings.mysql_dsn


@pytest.fixture
def shard_map(shard_dsns: tuple[str, str], names: tuple[str, str], tmp_path: Path) -> Iterator[str]:
    _, schema = names
    path = tmp_path / "shards.json"
    shards = [{"name": "a", "dsn": shard_dsns[0]}, {"name": "b", "dsn": shard_dsns[1]}]
    path.write_text(json.dumps({"shards": shards}))
    yield str(path)
    store = open_store(shard_dsns[1], schema)  # the first is the `names` fixture's
    try:
        store.drop()
    finally:
        store.close()


def _cli(
    shard_map: str, schema: str, prefix: str
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`pinledger <args>` on the test's shard map, schema and topic prefix."""

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_pinledger(
            *args,
            PINLEDGER_STORE_SHARDS=shard_map,
            PINLEDGER_SCHEMA=schema,
            PINLEDGER_TOPIC_PREFIX=prefix,
        )

    return cli


def _jobs_by_partition(store: LedgerStore, queue: str) -> dict[int, int]:
    held: dict[int, int] = {}
    for state in JobState:
        for row in store.select(JobFilter(queue, state, priority=1), 100_000):
            held[row.partition] = held.get(row.partition, 0) + 1
    return held


def _scanned(client: PinLaterClient, queue: str, state: JobState, page: int) -> list[str]:
    """Every job of a state, page after page by the continuation token."""
    scanned = client.scan(queue, state, limit=page)
    seen = [j.descriptor for j in scanned.jobs]
    while scanned.more:
        scanned = client.scan(queue, state, continuation=scanned.continuation, limit=page)
        seen += [j.descriptor for j in scanned.jobs]
    return seen


def _each_shard_holds_its_partitions(
    shard_dsns: tuple[str, str], schema: str, queue: str, jobs: int
) -> None:
    stores = [open_store(dsn, schema) for dsn in shard_dsns]
    try:
        (row,) = [r for r in stores[0].queues() if r.name == queue]
        placed = {p: row.shard_of(p) or "a" for p in range(row.partitions)}
        assert [placed[p] for p in range(6)] == ["a", "b", "a", "b", "a", "b"], placed
        for name, store in zip("ab", stores, strict=True):
            held = _jobs_by_partition(store, queue)
            assert held, f"shard {name} holds none of the queue's jobs"
            assert {placed[p] for p in held} == {name}, (name, held, placed)
        assert sum(sum(_jobs_by_partition(s, queue).values()) for s in stores) == jobs
    finally:
        for store in stores:
            store.close()


def _all_succeeded(client: PinLaterClient, enqueued: set[str]) -> dict[str, Any]:
    """Every job's info once each is SUCCEEDED. A lookup waits for what its own server
    appended; an ack through the other server is projected a moment later."""
    infos: dict[str, Any] = {}

    def done() -> bool:
        infos.update(client.lookup(enqueued))
        return {d for d, i in infos.items() if i.state == JobState.SUCCEEDED} == enqueued

    try:
        wait_for(done, timeout=15)
    except AssertionError:
        left = {d: i.state.name for d, i in infos.items() if i.state != JobState.SUCCEEDED}
        raise AssertionError(f"acked but not SUCCEEDED: {left}") from None
    return infos


def test_a_queue_over_two_shards_serves_counts_scans_and_replays(
    names: tuple[str, str],
    shard_map: str,
    shard_dsns: tuple[str, str],
    tmp_path: Path,
    kafka: Log,
) -> None:
    prefix, schema = names
    queue = f"spread_{uuid.uuid4().hex[:6]}"
    options = server_settings(PINLEDGER_PARTITIONS="4", PINLEDGER_STORE_SHARDS=shard_map)
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=options) for _ in range(2)]

    cli = _cli(shard_map, schema, prefix)

    with running(servers, tmp_path):
        address = [f"127.0.0.1:{s.port}" for s in servers]
        with PinLaterClient(address) as client:
            client.create_queue(queue)
        load = Load(address, queue)
        load.start()
        try:
            wait_for(lambda: len(load.acked) >= 200, timeout=90)
            load.drain()
        finally:
            load.stop()
        assert not load.errors, load.errors
        enqueued = set(load.enqueued)
        assert {parse(d).partition for d in enqueued} == {0, 1, 2, 3}

        with PinLaterClient(address) as client:
            infos = _all_succeeded(client, enqueued)
            assert client.count(queue, JobState.SUCCEEDED) == len(enqueued)
            seen = _scanned(client, queue, JobState.SUCCEEDED, page=37)
            assert len(seen) == len(set(seen)) == len(enqueued), "each job once, across shards"
            assert set(seen) == enqueued
            run_after = [infos[d].run_after_ms or 0 for d in seen]
            assert run_after == sorted(run_after, reverse=True), "newest first across shards"

        # A resize places the partitions it adds, evenly: 4 and 5 on a and b.
        resized = cli("queue", "resize", queue, "6")
        assert resized.returncode == 0, resized.stdout + resized.stderr
        home = open_store(shard_dsns[0], schema)
        try:
            wait_for(
                lambda: (
                    [r.shards for r in home.queues() if r.name == queue]
                    == [("a", "b", "a", "b", "a", "b")]
                ),
                timeout=30,
            )
        finally:
            home.close()

    # The placements are catalog facts; each shard holds its partitions' jobs only.
    shows = cli("shards")
    assert shows.returncode == 0, shows.stdout + shows.stderr
    # shard, store, new partitions, partitions: three of the six on each.
    rows = [line.split()[:4] for line in shows.stdout.splitlines()[1:]]
    assert [(r[0], r[3]) for r in rows] == [("a", "3"), ("b", "3")], shows.stdout
    _each_shard_holds_its_partitions(shard_dsns, schema, queue, len(enqueued))

    verified = cli("replay")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "identical" in verified.stdout, verified.stdout
    # Rebuilt into a scratch schema on each shard, each compared with its live tables.
    rebuilt = cli("replay", "--into-schema")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert rebuilt.stdout.count("identical: the replayed projection equals") == 2, rebuilt.stdout
    assert "shard b (" in rebuilt.stdout


class _CountingLoad(Load):
    """The load, counting how often each job was handed out and which acks failed."""

    def __init__(self, address: list[str], queue: str) -> None:
        super().__init__(address, queue)
        self.handed: Counter[str] = Counter()
        self.unacked: set[str] = set()

    def _work(self) -> None:
        with PinLaterClient(self.address, source="move:worker") as client:
            while not self._stop.is_set():
                try:
                    jobs = client.dequeue(self.queue, 20)
                except ClientError as exc:
                    self.errors.append(exc)
                    self._stop.wait(0.1)
                    continue
                done = [job.descriptor for job in jobs]
                self.handed.update(done)
                if not done:
                    self._stop.wait(0.02)
                    continue
                try:
                    client.ack(self.queue, succeeded=done)
                    self.acked.update(done)
                except ClientError as exc:
                    self.errors.append(exc)
                    self.unacked.update(done)  # handed out again after its claim times out


def test_partitions_move_under_load_and_a_server_killed_mid_move_loses_nothing(
    names: tuple[str, str],
    shard_map: str,
    shard_dsns: tuple[str, str],
    tmp_path: Path,
    kafka: Log,
) -> None:
    """`pinledger move-partition` moves partition 0 from a to b while jobs are enqueued,
    dequeued and acked: no call fails, no job is handed out twice. Then `--from a`
    drains a while one of the two servers is SIGKILLed: every acknowledged enqueue
    still ends SUCCEEDED, a holds none of the queue's rows, and the log replays to what
    b holds."""
    prefix, schema = names
    queue = f"move_{uuid.uuid4().hex[:6]}"
    options = server_settings(
        PINLEDGER_PARTITIONS="4", PINLEDGER_STORE_SHARDS=shard_map, PINLEDGER_CLAIM_TIMEOUT_S="3"
    )
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=options) for _ in range(2)]

    cli = _cli(shard_map, schema, prefix)

    with running(servers, tmp_path):
        address = [f"127.0.0.1:{s.port}" for s in servers]
        with PinLaterClient(address) as client:
            client.create_queue(queue)
        load = _CountingLoad(address, queue)
        load.start()
        try:
            wait_for(lambda: len(load.acked) >= 200, timeout=90)
            moved = cli(
                "move-partition", "--queue", queue, "--partition", "0", "--to", "b", "--settle", "3"
            )
            assert moved.returncode == 0, moved.stdout + moved.stderr
            assert f"moved {queue}[0] from 'a' to 'b'" in moved.stdout, moved.stdout
            load.enqueue_more(100)
            wait_for(lambda: set(load.enqueued[:-20]) <= load.acked, timeout=60)
            assert not load.errors, load.errors
            assert max(load.handed.values()) == 1, "a job was handed out twice"

            drained: list[subprocess.CompletedProcess[str]] = []
            mover = threading.Thread(
                target=lambda: drained.append(cli("move-partition", "--from", "a", "--settle", "3"))
            )
            mover.start()
            time.sleep(1.0)
            servers[1].kill()  # mid-move: building, switching or cleaning up
            mover.join(timeout=150)
            assert drained, "the drain did not finish"
            assert drained[0].returncode == 0, drained[0].stdout + drained[0].stderr
            assert f"moved {queue}[2] from 'a' to 'b'" in drained[0].stdout, drained[0].stdout
            load.enqueue_more(100)
            load.drain()
        finally:
            load.stop()
        twice = {d for d, n in load.handed.items() if n > 1}
        assert twice <= load.unacked, "only a job whose ack failed is handed out again"
        with PinLaterClient(address[:1]) as client:
            infos = client.lookup(load.enqueued)
            assert {d for d, i in infos.items() if i.state == JobState.SUCCEEDED} == set(
                load.enqueued
            )

    print(moved.stdout, drained[0].stdout)  # the moves' speed, in the test's output
    _all_on_b(cli, shard_dsns, schema, queue, len(set(load.enqueued)))


def _all_on_b(
    cli: Callable[..., subprocess.CompletedProcess[str]],
    shard_dsns: tuple[str, str],
    schema: str,
    queue: str,
    jobs: int,
) -> None:
    """Every partition placed on b, a holds none of the queue's rows, b holds them all,
    and the log replays to what the shards hold."""
    shows = cli("shards")
    assert shows.returncode == 0, shows.stdout + shows.stderr
    rows = [line.split()[:4] for line in shows.stdout.splitlines()[1:]]
    assert [(r[0], r[3]) for r in rows] == [("a", "0"), ("b", "4")], shows.stdout
    stores = [open_store(dsn, schema) for dsn in shard_dsns]
    try:
        assert _jobs_by_partition(stores[0], queue) == {}
        # And an enqueue the killed server appended but never answered, maybe.
        assert sum(_jobs_by_partition(stores[1], queue).values()) in (jobs, jobs + 1, jobs + 2)
    finally:
        for store in stores:
            store.close()
    verified = cli("replay")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "identical" in verified.stdout, verified.stdout
