"""The stack's three-broker Kafka cluster (`bash stack/stack.sh cluster ...`), the one
the chaos tests crash brokers of: a topic with three replicas and min ISR 2 keeps
taking appends while one broker is down, and the broker comes back into the cluster.

The test starts the cluster itself (it fails, never skips, when that cannot be done)
and leaves it running for later tests; it deletes its own topics.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Append, LogRecord, Position, TopicPolicy, queue_topic

# kafka-python 3.0.12 does not close a socket whose connect fails (net/inet.py
# sock_connect raises with it open): every reconnect attempt to the killed broker leaves
# one, held by the failed connection's exception, for the garbage collector, which
# warns. Nothing of ours leaks; see `collect_leaked_sockets`.
KAFKA_PYTHON_SOCKET_LEAK = "ignore:unclosed <socket.socket:ResourceWarning"

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings(KAFKA_PYTHON_SOCKET_LEAK)]

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "stack" / "stack.sh"
# Bounds, not expectations: a cold start formats three nodes and starts three JVMs.
STACK_CALL_LIMIT_S = 300
READ_LIMIT_S = 30


def stack(*args: str) -> str:
    """Run stack/stack.sh; its stdout, or the test fails with its stderr."""
    try:
        done = subprocess.run(
            ["bash", str(STACK), *args],
            capture_output=True,
            text=True,
            timeout=STACK_CALL_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"`stack.sh {' '.join(args)}` did not finish within {exc.timeout} s")
    if done.returncode != 0:
        pytest.fail(f"`stack.sh {' '.join(args)}` failed (exit {done.returncode}):\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="module")
def cluster() -> str:
    """The cluster's bootstrap list, from the export line `cluster up` prints."""
    out = stack("cluster", "up")
    head = "export PINLEDGER_KAFKA_CLUSTER="
    lines = [line for line in out.splitlines() if line.startswith(head)]
    assert lines, f"`stack.sh cluster up` printed no {head} line:\n{out}"
    return lines[-1][len(head) :]


def cluster_log(bootstrap: str) -> KafkaLog:
    policy = TopicPolicy(replication_factor=3, min_insync_replicas=2)
    return KafkaLog(KafkaSettings(bootstrap=bootstrap, client_id="pinledger-tests", topics=policy))


@pytest.fixture(autouse=True)
def collect_leaked_sockets(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Collect kafka-python's leaked sockets after the test, under this module's
    warning filter, rather than in whatever test, or at the session's end, the
    collector would run next. The test's logs are closed by then; what still holds the
    sockets is pytest's captured records of kafka-python's "Connection failed: <the
    exception>" lines (already rendered into the report), so drop those first."""
    yield
    for when in ("setup", "call"):
        caplog.get_records(when).clear()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "unclosed <socket.socket", ResourceWarning)
        gc.collect()


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
