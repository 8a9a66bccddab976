"""Topics are created with an explicit retention and the configured replication, and
`pinledger doctor` reports the settings that matter (on the one-broker stack; the
three-broker rules are unit-tested in tests/unit/test_durability.py)."""

from __future__ import annotations

import subprocess
import uuid

from kafka import KafkaAdminClient

from pinledger.ledger.events import Actor
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import TopicPolicy, catalog_topic, queue_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.service.testing.servers import run_pinledger


def _doctor(prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pinledger("doctor", *args, PINLEDGER_TOPIC_PREFIX=prefix)


def test_topics_keep_the_ledger_forever_by_default(kafka: KafkaLog, prefix: str) -> None:
    writer = LedgerWriter(kafka, prefix)
    writer.ensure_catalog(0, Actor(source="test"))
    kafka.create_topic(queue_topic(prefix, "jobs"), 3)
    states = kafka.topic_states([catalog_topic(prefix), queue_topic(prefix, "jobs")])
    assert set(states) == {catalog_topic(prefix), queue_topic(prefix, "jobs")}
    jobs = states[queue_topic(prefix, "jobs")]
    assert (jobs.partitions, jobs.replicas, jobs.offline) == (3, 1, 0)
    assert (jobs.retention_ms, jobs.retention_bytes, jobs.cleanup_policy) == (-1, -1, "delete")
    assert kafka.broker_count() == 1

    done = _doctor(prefix)
    assert done.returncode == 0, done.stderr
    assert queue_topic(prefix, "jobs") in done.stdout
    assert "forever" in done.stdout
    assert "0 unsafe, 0 warning(s)" in done.stdout
    # One broker: a note that this is a development cluster, for both topics at once.
    assert "note     2 topics: a 1-broker cluster" in done.stdout


def test_a_finite_retention_and_min_isr_are_set_and_reported(kafka: KafkaLog, prefix: str) -> None:
    policy = TopicPolicy(min_insync_replicas=1, retention_ms=3_600_000)
    log = KafkaLog(KafkaSettings(bootstrap=kafka.bootstrap, client_id="durability", topics=policy))
    try:
        log.create_topic(queue_topic(prefix, "short"), 1)
        state = log.topic_states([queue_topic(prefix, "short")])[queue_topic(prefix, "short")]
    finally:
        log.close()
    assert (state.retention_ms, state.min_insync_replicas) == (3_600_000, 1)
    done = _doctor(prefix, "--json")
    assert done.returncode == 0, done.stderr
    assert '"retention_ms": 3600000' in done.stdout
    assert "older records are deleted" in done.stdout


def test_doctor_fails_on_an_unsafe_topic(kafka: KafkaLog, prefix: str) -> None:
    # A topic someone compacted: compaction deletes ledger history.
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, client_id="durability-test")
    try:
        admin.create_topics(
            {
                queue_topic(prefix, f"c{uuid.uuid4().hex[:6]}"): {
                    "num_partitions": 1,
                    "configs": {"cleanup.policy": "compact"},
                }
            },
            wait_for_metadata=True,
        )
    finally:
        admin.close()
    done = _doctor(prefix)
    assert done.returncode == 1
    assert "unsafe" in done.stdout and "compaction deletes ledger history" in done.stdout
    assert "fix: set cleanup.policy=delete" in done.stdout


def test_the_catalog_keeps_its_records_whatever_the_retention(kafka: KafkaLog, prefix: str) -> None:
    """Its queue records and the cluster's ledger format (decision 0025) must outlive
    a finite retention; the queues' topics get that retention."""
    policy = TopicPolicy(retention_ms=3_600_000)
    log = KafkaLog(KafkaSettings(bootstrap=kafka.bootstrap, client_id="durability", topics=policy))
    try:
        LedgerWriter(log, prefix).create_queue("short", 1, 0, Actor(source="test"))
        states = log.topic_states([catalog_topic(prefix), queue_topic(prefix, "short")])
    finally:
        log.close()
    assert states[catalog_topic(prefix)].retention_ms == -1
    assert states[queue_topic(prefix, "short")].retention_ms == 3_600_000
