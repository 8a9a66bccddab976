"""A poison record on the real stack (issue 38; decision 0032): a real `pinledger serve`
on Kafka and Postgres, a record whose custom status holds a NUL (which Postgres refuses
in text) appended straight to one partition of a queue's topic. Another queue keeps
serving under load throughout; /ready and /metrics name the paused partition; the
`pinledger skip-record` command resumes it; a restarted server does not stall on the
record; and the log replays to exactly the live tables, skipped record and all."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Enqueued, Envelope
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.log import Append, queue_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.service.config import Config
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    run_pinledger,
    wait_for,
)
from tests.integration.conftest import Names, server_settings

pytestmark = pytest.mark.integration

PRODUCER = Actor("a-foreign-producer:host", "", "")


@dataclass
class Load:
    """Enqueues to a queue and dequeues from it in a loop, through its own client; what
    a worker of the other queue sees while one partition of "mail" is paused."""

    server: ServerProcess
    queue: str
    served_at: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        client = self.server.client()
        try:
            while not self.stop.is_set():
                try:
                    client.enqueueJobs(
                        context(),
                        p.PinLaterEnqueueRequest(
                            queueName=self.queue, jobs=[p.PinLaterJob(body=b"load")]
                        ),
                    )
                    got = client.dequeueJobs(
                        context(), p.PinLaterDequeueRequest(queueName=self.queue, limit=10)
                    )
                    if got.jobs:
                        self.served_at.append(time.monotonic())
                except p.PinLaterException as exc:
                    self.failures.append(f"{exc.errorCode}: {exc.message[:120]}")
                time.sleep(0.02)
        finally:
            client.close()

    def served_since(self, moment: float) -> int:
        return sum(1 for t in self.served_at if t >= moment)


@contextmanager
def loaded(server: ServerProcess, queue: str) -> Iterator[Load]:
    load = Load(server, queue)
    thread = threading.Thread(target=load.run, name="load", daemon=True)
    thread.start()
    try:
        yield load
    finally:
        load.stop.set()
        thread.join(timeout=10)


def ready(server: ServerProcess) -> tuple[int, dict[str, Any]]:
    with server.admin_get("/ready") as answer:
        return answer.status, json.loads(answer.read())


def paused_metric(server: ServerProcess) -> str | None:
    with server.admin_get("/metrics") as answer:
        text = answer.read().decode()
    found = re.search(
        r'^pinledger_partition_paused\{partition="0",queue="mail"\} (\S+)$', text, re.M
    )
    return None if found is None else found.group(1)


def skip_record(names: Names, offset: int) -> str:
    """`pinledger skip-record` as an operator runs it; its output."""
    prefix, schema = names
    done = run_pinledger(
        *("skip-record", "--queue", "mail", "--partition", "0", "--offset", str(offset)),
        *("--reason", "a NUL in a custom status"),
        timeout=60,
        PINLEDGER_TOPIC_PREFIX=prefix,
        PINLEDGER_SCHEMA=schema,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def replays_identical(names: Names, kafka: KafkaLog, config: Config, offset: int) -> None:
    """Rebuilt into a scratch schema and verified in memory (`pinledger replay`): the
    same as the live tables, the skip included."""
    prefix, schema = names
    live = Store(config.pg_dsn, schema)
    scratch = Store(config.pg_dsn, f"{schema}_replay")
    try:
        report = replay(live, scratch, kafka, prefix, Scope())
        assert report.identical, report.diffs
        assert live.skipped_records("mail", 0) == {offset: "a NUL in a custom status"}
    finally:
        live.close()
        scratch.drop()
        scratch.close()
    verified = run_pinledger(
        "replay",
        "--workers",
        "1",
        timeout=60,
        PINLEDGER_TOPIC_PREFIX=prefix,
        PINLEDGER_SCHEMA=schema,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def append_poison(kafka: KafkaLog, prefix: str) -> int:
    """A record whose custom status holds a NUL, around the Thrift edge (which refuses
    it): straight into partition 0 of queue "mail". Its offset."""
    poison = Envelope(int(time.time() * 1000), PRODUCER, (Enqueued(b"p", 1, 0, 3, "a\x00b"),))
    [offset] = kafka.append([Append(queue_topic(prefix, "mail"), 0, codec.encode(poison))])
    return offset


def test_a_poison_record_pauses_its_partition_alone_until_skipped(
    names: Names, kafka: KafkaLog, config: Config, tmp_path: Path
) -> None:
    prefix, schema = names
    settings = server_settings(PINLEDGER_PARTITIONS="2")
    server = ServerProcess(prefix=prefix, schema=schema, settings=settings).start(tmp_path)
    try:
        client = server.client()
        for queue in ("mail", "other"):
            client.createQueue(context(), queue)
        writer = LedgerWriter(kafka, prefix)
        [before] = writer.enqueue("mail", 0, [Enqueued(b"before", 1, 0, 3)], 0, PRODUCER)
        with loaded(server, "other") as load:
            wait_for(lambda: load.served_since(0), 30)
            offset = append_poison(kafka, prefix)
            [after] = writer.enqueue("mail", 0, [Enqueued(b"after", 1, 0, 3)], 0, PRODUCER)
            paused_at = time.monotonic()

            def named() -> dict[str, Any] | None:
                status, body = ready(server)
                return body if status == 200 and "mail[0]" in body.get("paused", {}) else None

            said = wait_for(named, 30)["paused"]["mail[0]"]
            assert said.startswith(f"paused at offset {offset}: ")
            assert "u0000 cannot be converted to text" in said  # Postgres's words, jsonb
            assert paused_metric(server) == "1"
            # The other queue served throughout: nothing failed, and it goes on.
            wait_for(lambda: load.served_since(paused_at + 2) > 0, 30)
            assert load.failures == []
            # The jobs before the record are projected (the batch was narrowed down).
            found = client.lookupJobs(
                context(), p.PinLaterLookupJobRequest(jobDescriptors=[str(before)])
            )
            assert found[str(before)].jobState == p.PinLaterJobState.PENDING

            shown = skip_record(names, offset)
            assert f"enq job {offset * 1000}: 1 body bytes, priority 1" in shown
            assert f"skipped mail[0] offset {offset}" in shown
            wait_for(lambda: "paused" not in ready(server)[1], 30)
            assert paused_metric(server) == "0"
            assert set(dequeue_until(client, "mail", 2, limit=10)) == {str(before), str(after)}
            assert load.failures == []
        client.close()

        # A restarted server reads the skip from the catalog: it does not stall.
        server.stop()
        server = ServerProcess(prefix=prefix, schema=schema, settings=settings).start(tmp_path)
        client = server.client()
        [late] = writer.enqueue("mail", 0, [Enqueued(b"late", 1, 0, 3)], 0, PRODUCER)
        assert set(dequeue_until(client, "mail", 1, limit=10)) == {str(late)}
        assert "paused" not in ready(server)[1]
        client.close()
    finally:
        server.stop()
    replays_identical(names, kafka, config, offset)
