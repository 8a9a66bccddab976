"""A queue grown live on real servers (issue 24, part 1): two servers share a queue of two
partitions under enqueue and dequeue load; `pinledger queue resize` grows it to six;
new enqueues spread over the six, every job enqueued before, during and after is
dequeued, acked and SUCCEEDED, and replaying the log gives the projection the servers
built."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.jobs import Job, JobState
from pinledger.ledger.descriptor import parse
from pinledger.ledger.log import Log
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.verify import verify
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, run_pinledger, running, wait_for
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration


class Load:
    """One thread enqueuing a job at a time, one dequeuing and acking, until stopped."""

    def __init__(self, address: list[str], queue: str) -> None:
        self.address, self.queue = address, queue
        self.enqueued: list[str] = []
        self.acked: set[str] = set()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._enqueuing = threading.Event()
        self._threads = [
            threading.Thread(target=self._guard, args=(self._enqueue,), daemon=True),
            threading.Thread(target=self._guard, args=(self._work,), daemon=True),
        ]

    def start(self) -> None:
        self._enqueuing.set()
        for thread in self._threads:
            thread.start()

    def _guard(self, body: object) -> None:
        try:
            body()  # type: ignore[operator]
        except BaseException as exc:  # handed to the test
            self.errors.append(exc)

    def _enqueue(self) -> None:
        with PinLaterClient(self.address, source="resize:enqueuer") as client:
            n = 0
            while self._enqueuing.is_set():
                self.enqueued += client.enqueue(self.queue, [Job(b"job %d" % n)])
                n += 1

    def _work(self) -> None:
        with PinLaterClient(self.address, source="resize:worker") as client:
            while not self._stop.is_set():
                jobs = client.dequeue(self.queue, 20)
                if jobs:
                    done = [job.descriptor for job in jobs]
                    client.ack(self.queue, succeeded=done)
                    self.acked.update(done)
                else:
                    self._stop.wait(0.02)

    def stop_enqueuing(self) -> None:
        self._enqueuing.clear()
        self._threads[0].join(timeout=30)

    def stop(self) -> None:
        self._enqueuing.clear()
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


def test_a_queue_grows_from_two_to_six_partitions_under_load(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    prefix, schema = names
    settings = server_settings(PINLEDGER_PARTITIONS="2")
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=settings) for _ in range(2)]
    queue = f"grow_{uuid.uuid4().hex[:6]}"
    with running(servers, tmp_path):
        address = [f"127.0.0.1:{servers[0].port}", f"127.0.0.1:{servers[1].port}"]
        with PinLaterClient(address) as client:
            client.create_queue(queue)
        load = Load(address, queue)
        load.start()
        try:
            wait_for(lambda: len(load.acked) >= 50, timeout=60)
            resized = run_pinledger("queue", "resize", queue, "6", PINLEDGER_TOPIC_PREFIX=prefix)
            assert resized.returncode == 0, resized.stdout + resized.stderr
            assert "from 2 to 6 partitions" in resized.stdout

            def spread() -> bool:
                return {parse(d).partition for d in load.enqueued[-60:]} == set(range(6))

            wait_for(spread, timeout=30)
            wait_for(lambda: len(load.enqueued) >= len(load.acked) + 100, timeout=60)
            load.stop_enqueuing()
            wait_for(lambda: load.acked >= set(load.enqueued), timeout=60)
        finally:
            load.stop()
        assert not load.errors, load.errors
        with PinLaterClient(address) as client:
            infos = client.lookup(load.enqueued)
        assert {d for d, info in infos.items() if info.state == JobState.SUCCEEDED} == set(
            load.enqueued
        )
        again = run_pinledger("queue", "resize", queue, "6", PINLEDGER_TOPIC_PREFIX=prefix)
        assert again.returncode == 0 and "nothing to do" in again.stdout
        none = run_pinledger("queue", "resize", queue, "0", PINLEDGER_TOPIC_PREFIX=prefix)
        assert none.returncode == 2 and "at least one partition" in none.stdout

    store = Store(config.pg_dsn, schema)
    try:
        report = verify(store, kafka, prefix, Scope())
    finally:
        store.close()
    assert report.identical, report.diffs
