"""Several server processes sharing the partitions: forwarding, failover after
SIGKILL, and the log still replaying to the live tables afterwards."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger import descriptor
from pinledger.ledger.kafka import KafkaLog
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.service.config import Config
from pinledger.service.testing.servers import (
    ServerProcess,
    connect,
    context,
    dequeue_until,
    wait_for,
)
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration

SUCCEEDED = 2


@pytest.fixture
def cluster_names(kafka: KafkaLog, config: Config) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"cl{tag}.", f"cl_{tag}"
    yield prefix, schema
    for topic in kafka.topics():
        if topic.startswith(prefix):
            kafka.delete_topic(topic)
    Store(config.pg_dsn, schema).drop()


def start_cluster(
    names: tuple[str, str], count: int, log_dir: Path, **settings: str
) -> list[ServerProcess]:
    prefix, schema = names
    servers = [
        ServerProcess(prefix=prefix, schema=schema, settings=server_settings(**settings))
        for _ in range(count)
    ]
    for server in servers:
        server.start(log_dir)
    return servers


def owners_spread(kafka: KafkaLog, prefix: str, queue: str, servers: int) -> bool:
    """Every live server owns some of the queue's partitions."""
    members = kafka.group_members(f"{prefix}owners")
    topic = f"{prefix}q.{queue}"
    owning = [m for m in members if any(t == topic for t, _ in m.partitions)]
    return len(members) == servers and len(owning) == servers


def test_a_server_owning_few_partitions_still_dequeues_every_job(
    kafka: KafkaLog, cluster_names: tuple[str, str], tmp_path: Path
) -> None:
    # Round robin per call: the jobs land on every partition, those of both servers.
    servers = start_cluster(
        cluster_names, 2, tmp_path, PINLEDGER_PARTITIONS="4", PINLEDGER_ENQUEUE_STICKY_MS="0"
    )
    try:
        with contextlib.closing(servers[0].client()) as first:
            first.createQueue(context(), "shared")
            wait_for(lambda: owners_spread(kafka, cluster_names[0], "shared", 2), timeout=60)
            descriptors = []
            for i in range(12):  # one job per call: enqueues rotate over the partitions
                answer = first.enqueueJobs(
                    context(),
                    p.PinLaterEnqueueRequest(
                        queueName="shared", jobs=[p.PinLaterJob(body=f"{i}".encode())]
                    ),
                )
                descriptors += answer.jobDescriptors
            assert len({descriptor.parse(d).partition for d in descriptors}) == 4
            got = dequeue_until(first, "shared", 12, limit=50, timeout=60)
            assert set(got) == set(descriptors)
    finally:
        for server in servers:
            server.stop()


class Workers:
    """Workers that dequeue and ack through whichever servers are alive."""

    def __init__(self, servers: list[ServerProcess], queue: str, threads: int) -> None:
        self.servers = servers
        self.queue = queue
        self.done: set[str] = set()
        self.stop = threading.Event()
        self.errors = 0
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.work, args=(f"worker:{i}", i), daemon=True)
            for i in range(threads)
        ]

    def alive(self) -> list[ServerProcess]:
        return [s for s in self.servers if s.proc is not None and s.proc.poll() is None]

    def work(self, source: str, start: int) -> None:
        turn = start
        client: Any = None
        while not self.stop.is_set():
            try:
                if client is None:
                    live = self.alive()
                    client = connect(live[turn % len(live)].port, timeout_ms=10_000)
                answer = client.dequeueJobs(
                    context(source), p.PinLaterDequeueRequest(queueName=self.queue, limit=20)
                )
                jobs = list(answer.jobs or {})
                if jobs:
                    acks = [p.PinLaterJobAckInfo(jobDescriptor=d) for d in jobs]
                    client.ackDequeuedJobs(
                        context(source),
                        p.PinLaterJobAckRequest(queueName=self.queue, jobsSucceeded=acks),
                    )
                    with self.lock:
                        self.done.update(jobs)
                else:
                    time.sleep(0.05)
            except Exception:
                # The server died under us: go to the next one, as a PinLater client
                # with a server list does.
                self.errors += 1
                if client is not None:
                    client.close()
                client = None
                turn += 1
                time.sleep(0.1)
        if client is not None:
            client.close()

    def __enter__(self) -> Workers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def enqueue_through_live(workers: Workers, bodies: list[bytes]) -> list[str]:
    """Enqueue, retrying on another server when one dies mid-call."""
    for attempt in range(20):
        live = workers.alive()
        client = connect(live[attempt % len(live)].port, timeout_ms=10_000)
        try:
            answer = client.enqueueJobs(
                context("producer"),
                p.PinLaterEnqueueRequest(
                    queueName=workers.queue, jobs=[p.PinLaterJob(body=b) for b in bodies]
                ),
            )
            return list(answer.jobDescriptors)
        except Exception:
            time.sleep(0.2)
        finally:
            client.close()
    raise AssertionError("no live server took the enqueue")


def test_sigkill_of_one_server_moves_its_partitions_and_no_job_is_lost(
    kafka: KafkaLog, config: Config, cluster_names: tuple[str, str], tmp_path: Path
) -> None:
    prefix, schema = cluster_names
    servers = start_cluster(
        cluster_names, 3, tmp_path, PINLEDGER_PARTITIONS="6", PINLEDGER_CLAIM_TIMEOUT_S="3"
    )
    try:
        setup = servers[0].client()
        setup.createQueue(context(), "flow")
        setup.close()
        wait_for(lambda: owners_spread(kafka, prefix, "flow", 3), timeout=60)

        enqueued: list[str] = []
        with Workers(servers, "flow", threads=3) as workers:
            for batch in range(60):
                enqueued += enqueue_through_live(
                    workers, [f"{batch}-{i}".encode() for i in range(10)]
                )
                if batch == 20:
                    servers[2].kill()  # while jobs flow
            # Every job must end SUCCEEDED: the killed server's partitions move to the
            # others, its unacked claims time out and are handed out again.
            survivor = servers[0].client()

            def all_succeeded() -> bool:
                try:
                    found = survivor.lookupJobs(
                        context(), p.PinLaterLookupJobRequest(jobDescriptors=enqueued)
                    )
                except p.PinLaterException as exc:
                    # Until the killed server's partitions have a new owner, a read of
                    # them says the projection is behind (never a stale answer).
                    assert exc.errorCode == p.ErrorCode.SHARD_CONNECTION_FAILED, exc
                    assert "the projection is behind" in exc.message, exc
                    return False
                return len(found) == len(enqueued) and all(
                    info.jobState == SUCCEEDED for info in found.values()
                )

            try:
                wait_for(all_succeeded, timeout=120, pause=1.0)
            finally:
                survivor.close()
        assert servers[2].proc is not None and servers[2].proc.returncode == -9
        assert len(set(enqueued)) == 600
    finally:
        for server in servers:
            server.stop()

    # The log is the truth: replaying it gives exactly the live tables.
    live = Store(config.pg_dsn, schema)
    scratch = Store(config.pg_dsn, f"{schema}_replay")
    try:
        report = replay(live, scratch, kafka, prefix, Scope())
        assert report.identical, report.diffs
        # Each job's history ends with the success that was applied.
        for text in enqueued[::37]:
            d = descriptor.parse(text)
            timeline = live.timeline("flow", d.partition, d.local_id)
            applied = [row[2] for row in timeline if row[8]]
            assert applied[0] == "enq" and applied[-1] == "ok"  # codec tags
    finally:
        live.close()
        scratch.drop()
