"""A queue resized live on real servers (issue 24): two servers share a queue of two
partitions under enqueue and dequeue load; `pinledger queue resize` grows it to six and
shrinks it to one; new enqueues go where the queue takes them, every job enqueued
before, during and after is dequeued, acked and SUCCEEDED, the closed partitions retire
once empty, and replaying the log gives the projection the servers built."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.client.jobs import Job, JobState
from pinledger.ledger.descriptor import parse
from pinledger.ledger.events import QueueResized
from pinledger.ledger.log import Log
from pinledger.projections.catalog_log import catalog_envelopes, resizes
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.verify import verify
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, run_pinledger, running, wait_for
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration


class Load:
    """One thread enqueuing a job at a time, one dequeuing and acking, until stopped. A
    call that fails (a server killed) is noted and the thread goes on: an enqueue that
    failed was not acknowledged, and a job whose ack failed comes back after its claim
    times out."""

    def __init__(self, address: list[str], queue: str) -> None:
        self.address, self.queue = address, queue
        self.enqueued: list[str] = []
        self.acked: set[str] = set()
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._enqueuing = threading.Event()
        self._threads = [
            threading.Thread(target=self._enqueue, daemon=True),
            threading.Thread(target=self._work, daemon=True),
        ]

    def start(self) -> None:
        self._enqueuing.set()
        for thread in self._threads:
            thread.start()

    def _enqueue(self) -> None:
        with PinLaterClient(self.address, source="resize:enqueuer") as client:
            n = 0
            while self._enqueuing.is_set():
                try:
                    self.enqueued += client.enqueue(self.queue, [Job(b"job %d" % n)])
                except ClientError as exc:
                    self.errors.append(exc)
                    time.sleep(0.1)
                n += 1

    def _work(self) -> None:
        with PinLaterClient(self.address, source="resize:worker") as client:
            while not self._stop.is_set():
                try:
                    jobs = client.dequeue(self.queue, 20)
                    if jobs:
                        done = [job.descriptor for job in jobs]
                        client.ack(self.queue, succeeded=done)
                        self.acked.update(done)
                    else:
                        self._stop.wait(0.02)
                except ClientError as exc:
                    self.errors.append(exc)
                    self._stop.wait(0.1)

    def enqueue_more(self, count: int, timeout: float = 60) -> None:
        mark = len(self.enqueued)
        wait_for(lambda: len(self.enqueued) >= mark + count, timeout=timeout)

    def drain(self, timeout: float = 90) -> None:
        """Stop enqueuing; wait until every acknowledged enqueue was dequeued and acked."""
        self._enqueuing.clear()
        self._threads[0].join(timeout=30)
        deadline = time.monotonic() + timeout
        while not self.acked >= set(self.enqueued):
            if time.monotonic() > deadline:
                missing = sorted(set(self.enqueued) - self.acked)
                try:
                    with PinLaterClient(self.address) as client:
                        found = client.lookup(missing[:20])
                    states: object = {d: (i.state.name, i.claim) for d, i in found.items()}
                except ClientError as exc:
                    states = exc
                by_partition = Counter(parse(d).partition for d in missing)
                raise AssertionError(
                    f"{len(missing)} jobs never acked (by partition {dict(by_partition)}), "
                    f"the first {missing[:5]}: {states}; {len(self.errors)} errors, the "
                    f"first {self.errors[:3]}, the last {self.errors[-3:]}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        self._enqueuing.clear()
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


def _partitions_of(descriptors: list[str]) -> set[int]:
    return {parse(d).partition for d in descriptors}


def _all_succeeded(address: list[str], load: Load) -> None:
    with PinLaterClient(address) as client:
        infos = client.lookup(load.enqueued)
    succeeded = {d for d, info in infos.items() if info.state == JobState.SUCCEEDED}
    assert succeeded == set(load.enqueued)


def _replays_identically(config: Config, kafka: Log, prefix: str, schema: str) -> None:
    store = Store(config.pg_dsn, schema)
    try:
        report = verify(store, kafka, prefix, Scope())
    finally:
        store.close()
    assert report.identical, report.diffs


def _resize(prefix: str, queue: str, partitions: int) -> str:
    done = run_pinledger("queue", "resize", queue, str(partitions), PINLEDGER_TOPIC_PREFIX=prefix)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextmanager
def _two_servers_under_load(
    names: tuple[str, str], tmp_path: Path, queue: str, **settings: str
) -> Iterator[tuple[list[ServerProcess], list[str], Load]]:
    """Two servers sharing a queue of two partitions, the load running on it (50 jobs
    acked already); the load stops when the block ends, the servers after it."""
    prefix, schema = names
    options = server_settings(PINLEDGER_PARTITIONS="2", **settings)
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=options) for _ in range(2)]
    with running(servers, tmp_path):
        address = [f"127.0.0.1:{servers[0].port}", f"127.0.0.1:{servers[1].port}"]
        with PinLaterClient(address) as client:
            client.create_queue(queue)
        load = Load(address, queue)
        load.start()
        try:
            wait_for(lambda: len(load.acked) >= 50, timeout=60)
            yield servers, address, load
        finally:
            load.stop()


def _retired_from(config: Config, schema: str, queue: str) -> int | None:
    store = Store(config.pg_dsn, schema)
    try:
        return {row.name: row for row in store.queues()}[queue].retired_from
    finally:
        store.close()


def test_a_queue_grows_to_six_partitions_and_shrinks_to_one_under_load(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    """Grown from two to six and shrunk to one under load: every acknowledged job
    SUCCEEDED; once their jobs are gone the closed partitions retire, and the queue
    serves on the one left."""
    prefix, schema = names
    queue = f"grow_{uuid.uuid4().hex[:6]}"
    with _two_servers_under_load(names, tmp_path, queue, PINLEDGER_RETIRE_AFTER_S="1") as (
        _,
        address,
        load,
    ):
        assert "from 2 to 6 partitions" in _resize(prefix, queue, 6)
        wait_for(lambda: _partitions_of(load.enqueued[-60:]) == set(range(6)), timeout=30)
        load.enqueue_more(100)
        assert "partitions 1..5 take no new jobs and drain" in _resize(prefix, queue, 1)
        wait_for(lambda: _partitions_of(load.enqueued[-40:]) == {0}, timeout=30)
        load.enqueue_more(100)
        load.drain()
        load.stop()
        assert not load.errors, load.errors
        _all_succeeded(address, load)
        again = run_pinledger("queue", "resize", queue, "1", PINLEDGER_TOPIC_PREFIX=prefix)
        assert again.returncode == 0 and "nothing to do" in again.stdout
        none = run_pinledger("queue", "resize", queue, "0", PINLEDGER_TOPIC_PREFIX=prefix)
        assert none.returncode == 2 and "at least one partition" in none.stdout

        # The closed partitions retire once they hold no job (collected, or deleted).
        assert _retired_from(config, schema, queue) is None
        with PinLaterClient(address) as client:
            while client.delete_jobs(queue, JobState.SUCCEEDED) > 0:
                pass
        wait_for(lambda: _retired_from(config, schema, queue) == 1, timeout=30)
        with PinLaterClient(address) as client:
            late = client.enqueue(queue, [Job(b"after %d" % i) for i in range(5)])
            assert _partitions_of(late) == {0}
            assert client.count(queue, JobState.PENDING) == 5
            got: list[str] = []

            def dequeued() -> bool:
                got.extend(job.descriptor for job in client.dequeue(queue, 5))
                return len(got) == len(late)

            wait_for(dequeued, timeout=30)
            assert sorted(got) == sorted(late)
    _replays_identically(config, kafka, prefix, schema)


def test_a_server_killed_while_a_queue_grows_and_shrinks_loses_nothing(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    """Grown to six, one of two servers is SIGKILLed while the owners take the new
    partitions; then shrunk to two while the survivor serves alone: every enqueue
    that was acknowledged ends SUCCEEDED, the draining partitions empty, and the log
    replays to the projection the servers built."""
    prefix, schema = names
    queue = f"kill_{uuid.uuid4().hex[:6]}"
    with _two_servers_under_load(names, tmp_path, queue, PINLEDGER_CLAIM_TIMEOUT_S="3") as (
        servers,
        address,
        load,
    ):
        _resize(prefix, queue, 6)
        servers[1].kill()  # while the group hands out the new partitions
        wait_for(lambda: _partitions_of(load.enqueued[-60:]) == set(range(6)), timeout=60)
        load.enqueue_more(100)
        assert "partitions 2..5 take no new jobs and drain" in _resize(prefix, queue, 2)
        wait_for(lambda: _partitions_of(load.enqueued[-40:]) == {0, 1}, timeout=30)
        load.enqueue_more(100)
        try:
            load.drain()
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_told(servers[0])}") from None
        load.stop()
        _all_succeeded(address[:1], load)
        with PinLaterClient(address[:1]) as client:
            assert client.count(queue, JobState.PENDING) == 0
            assert client.count(queue, JobState.IN_PROGRESS) == 0
    _replays_identically(config, kafka, prefix, schema)


def _told(server: ServerProcess) -> str:
    """The survivor's warnings and ownership lines, the last 60 (a failure's story)."""
    if server.log_path is None:
        return "no server log"
    lines = server.log_path.read_text(errors="replace").splitlines()
    kept = [
        line
        for line in lines
        if " WARNING " in line or " ERROR " in line or "pinledger.service.ownership" in line
    ]
    return f"server {server.port}'s log, its warnings and ownership lines:\n" + "\n".join(
        kept[-60:]
    )


def _changes(kafka: Log, prefix: str, queue: str) -> list[QueueResized]:
    changes = resizes(catalog_envelopes(kafka, prefix), queue)
    return [c.event for c in changes if isinstance(c.event, QueueResized)]


def test_a_queue_with_bounds_grows_under_load_and_shrinks_when_idle(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    """A queue whose config lets the servers adapt its partitions: under enqueue load
    they grow it (never past the maximum), and once its workers find it empty they
    shrink it to the minimum, each change a catalog record with the policy's reason;
    every acknowledged job SUCCEEDED and the log replays to the servers' projection."""
    prefix, schema = names
    queue = f"adapt_{uuid.uuid4().hex[:6]}"
    bounds = {
        "min": 1,
        "max": 6,
        "growRate": 10,
        "minDequeues": 10,
        "windowSeconds": 2,
        "cooldownSeconds": 3,
    }
    path = tmp_path / "queues.json"
    path.write_text(
        json.dumps({"queues": [{"name": queue, "queueConfig": {"partitions": bounds}}]})
    )
    with _two_servers_under_load(names, tmp_path, queue, PINLEDGER_QUEUE_CONFIG=str(path)) as (
        _,
        address,
        load,
    ):
        wait_for(lambda: any(c.partitions > 2 for c in _changes(kafka, prefix, queue)), timeout=60)
        grown = _changes(kafka, prefix, queue)[0]
        assert grown.reason.startswith("adaptive: ") and "per partition" in grown.reason
        load.enqueue_more(50)
        load.drain()  # enqueues stop; the worker goes on finding the queue empty
        wait_for(lambda: _changes(kafka, prefix, queue)[-1].partitions == 1, timeout=90)
        shrunk = _changes(kafka, prefix, queue)[-1]
        assert "dequeue calls came back empty" in shrunk.reason
        assert max(c.partitions for c in _changes(kafka, prefix, queue)) <= 6
        load.stop()
        assert not load.errors, load.errors
        _all_succeeded(address, load)
    _replays_identically(config, kafka, prefix, schema)
