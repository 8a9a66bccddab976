"""A queue paused and resumed on real servers (issue 42 part 4, decision 0035): two
servers share a queue of two partitions; `pinledger queue pause` run against the log
holds its jobs back on both (dequeueJobs on the other server answers none, /metrics on
both says paused) while enqueues go on; `pinledger queue resume` hands every job out
again; the verify's fold of the log gives the projection the servers built."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.jobs import Job
from pinledger.ledger.log import Log
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.verify import verify
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, run_pinledger, running, wait_for
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration


def _gauge(server: ServerProcess, queue: str) -> str | None:
    text = str(server.admin_get("/metrics").read().decode())
    for line in text.splitlines():
        if line.startswith(f'pinledger_queue_paused{{queue="{queue}"}} '):
            return str(line.split()[-1])
    return None


def _cli(prefix: str, *args: str) -> str:
    done = run_pinledger("queue", *args, PINLEDGER_TOPIC_PREFIX=prefix)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_pause_holds_every_servers_jobs_back_until_resumed(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    prefix, schema = names
    queue = f"pause_{uuid.uuid4().hex[:6]}"
    options = server_settings(PINLEDGER_PARTITIONS="2")
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=options) for _ in range(2)]
    with running(servers, tmp_path):
        one, other = (f"127.0.0.1:{s.port}" for s in servers)
        with PinLaterClient([one]) as first, PinLaterClient([other]) as second:
            first.create_queue(queue)
            before = first.enqueue(queue, [Job(b"before %d" % i) for i in range(20)])

            assert "paused queue" in _cli(prefix, "pause", queue, "--reason", "a test")
            wait_for(lambda: [_gauge(s, queue) for s in servers] == ["1", "1"])
            # Nothing from either server's partitions, for as long as it stays paused.
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                assert second.dequeue(queue, 50) == []
                assert first.dequeue(queue, 50) == []
                time.sleep(0.2)
            during = second.enqueue(queue, [Job(b"during %d" % i) for i in range(5)])
            again = run_pinledger("queue", "pause", queue, PINLEDGER_TOPIC_PREFIX=prefix)
            assert again.returncode == 0 and "already" in again.stdout

            assert "resumed queue" in _cli(prefix, "resume", queue)
            wait_for(lambda: [_gauge(s, queue) for s in servers] == ["0", "0"])
            got: set[str] = set()

            def all_dequeued() -> bool:
                got.update(job.descriptor for job in second.dequeue(queue, 50))
                return len(got) == len(before) + len(during)

            wait_for(all_dequeued)
            assert got == set(before) | set(during)
    missing = run_pinledger("queue", "pause", "nope", PINLEDGER_TOPIC_PREFIX=prefix)
    assert missing.returncode == 2 and "no queue 'nope'" in missing.stdout
    store = Store(config.pg_dsn, schema)
    try:
        report = verify(store, kafka, prefix, Scope())
        assert {row.name: row.paused for row in store.queues()} == {queue: False}
    finally:
        store.close()
    assert report.identical, report.diffs
