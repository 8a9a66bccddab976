"""The stack's three-broker Kafka cluster (`bash stack/stack.sh cluster ...`), the one
the chaos tests crash brokers of: a topic with three replicas and min ISR 2 keeps
taking appends while one broker is down, and the broker comes back into the cluster.

It deletes its own topics; the cluster fixture is in conftest.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Append, LogRecord, Position, TopicPolicy, queue_topic
from tests.chaos.conftest import ROOT, stack

pytestmark = pytest.mark.chaos

READ_LIMIT_S = 30


def cluster_log(bootstrap: str) -> KafkaLog:
    policy = TopicPolicy(replication_factor=3, min_insync_replicas=2)
    return KafkaLog(KafkaSettings(bootstrap=bootstrap, client_id="pinledger-tests", topics=policy))


@pytest.fixture
def prefix(cluster: str) -> Iterator[str]:
    """A fresh topic prefix; its topics are deleted afterwards (the cluster stays)."""
    name = f"test{uuid.uuid4().hex[:10]}."
    yield name
    log = cluster_log(cluster)
    try:
        for topic in log.topics():
            if topic.startswith(name):
                log.delete_topic(topic)
    finally:
        log.close()


def read_all(log: KafkaLog, topic: str, count: int) -> list[LogRecord]:
    """The first `count` records of partition 0, waiting at most READ_LIMIT_S."""
    reader = log.reader([Position(topic, 0, 0)])
    records: list[LogRecord] = []
    try:
        deadline = time.monotonic() + READ_LIMIT_S
        while len(records) < count and time.monotonic() < deadline:
            records += reader.poll(count, 500)
    finally:
        reader.close()
    return records


def doctor(bootstrap: str, prefix: str) -> tuple[int, dict[str, Any]]:
    """`pinledger doctor --json` on the cluster: (exit status, its report)."""
    env = {**os.environ, "PINLEDGER_KAFKA": bootstrap, "PINLEDGER_TOPIC_PREFIX": prefix}
    done = subprocess.run(
        [sys.executable, "-m", "pinledger", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), f"doctor failed (exit {done.returncode}):\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def test_a_replicated_topic_takes_appends_with_one_broker_down(cluster: str, prefix: str) -> None:
    log = cluster_log(cluster)
    try:
        crash_broker_2_between_appends(log, cluster, prefix)
    finally:
        log.close()


def crash_broker_2_between_appends(log: KafkaLog, cluster: str, prefix: str) -> None:
    topic = queue_topic(prefix, "chaos")
    assert log.create_topic(topic, 1)
    state = log.topic_states([topic])[topic]
    assert (state.replicas, state.min_insync_replicas) == (3, 2)
    [before] = log.append([Append(topic, 0, b"before the crash")])

    stack("cluster", "kill", "2")
    try:
        # Two brokers left still meet min.insync.replicas=2: the append is accepted
        # once the cluster has noticed the crash (fenced broker 2, moved leadership).
        [during] = log.append([Append(topic, 0, b"with broker 2 down")])
    finally:
        stack("cluster", "start", "2")
    assert during > before
    assert "broker 2: running" in stack("cluster", "status")

    # doctor counts the brokers that are up: all three again.
    status, report = doctor(cluster, prefix)
    assert report["brokers"] == 3
    [reported] = [t for t in report["topics"] if t["name"] == topic]
    assert (reported["replicas"], reported["min_insync_replicas"]) == (3, 2)
    unsafe = [f for f in report["findings"] if f["severity"] == "unsafe"]
    assert (status, unsafe) == (0, [])

    values = [r.value for r in read_all(log, topic, 2)]
    assert values == [b"before the crash", b"with broker 2 down"]
