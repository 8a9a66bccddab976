"""ledger/durability.py: which topic settings put the ledger at risk."""

from __future__ import annotations

import dataclasses

import pytest

from pinledger.ledger.durability import Severity, findings
from pinledger.ledger.log import TopicPolicy, TopicState

SAFE = TopicState(
    name="p.q.jobs",
    partitions=4,
    replicas=3,
    under_replicated=0,
    offline=0,
    min_insync_replicas=2,
    retention_ms=-1,
    retention_bytes=-1,
    cleanup_policy="delete",
    unclean_leader_election=False,
)


def judged(brokers: int = 3, **changes: object) -> set[tuple[Severity, str]]:
    state = dataclasses.replace(SAFE, **changes)  # type: ignore[arg-type]
    return {(f.severity, f.what.split(":")[0].split(" ")[0]) for f in findings(state, brokers)}


def test_a_safe_topic_on_a_production_cluster_has_no_finding() -> None:
    assert findings(SAFE, 3) == []
    assert findings(SAFE, 5) == []


@pytest.mark.parametrize(
    ("brokers", "changes", "severity", "first_word"),
    [
        (3, {"replicas": 1}, Severity.UNSAFE, "replication"),
        (3, {"min_insync_replicas": 1}, Severity.UNSAFE, "min.insync.replicas"),
        (3, {"min_insync_replicas": 3}, Severity.WARNING, "min.insync.replicas"),
        (3, {"unclean_leader_election": True}, Severity.UNSAFE, "unclean.leader.election.enable"),
        (3, {"cleanup_policy": "compact"}, Severity.UNSAFE, "cleanup.policy"),
        (3, {"cleanup_policy": "compact,delete"}, Severity.UNSAFE, "cleanup.policy"),
        (3, {"retention_ms": 604_800_000}, Severity.WARNING, "retention"),
        (3, {"retention_ms": 0}, Severity.WARNING, "retention"),
        (3, {"retention_bytes": 1 << 30}, Severity.WARNING, "retention.bytes"),
        (3, {"under_replicated": 2}, Severity.WARNING, "2"),
        (3, {"offline": 1}, Severity.UNSAFE, "1"),
    ],
)
def test_each_risk_is_found(
    brokers: int, changes: dict[str, object], severity: Severity, first_word: str
) -> None:
    assert judged(brokers, **changes) == {(severity, first_word)}


def test_two_replicas_on_five_brokers_with_both_required() -> None:
    assert judged(5, replicas=2) == {
        (Severity.UNSAFE, "replication"),
        (Severity.WARNING, "min.insync.replicas"),
    }


def test_a_development_cluster_is_a_note_not_a_fault() -> None:
    state = dataclasses.replace(SAFE, replicas=1, min_insync_replicas=1)
    (only,) = findings(state, brokers=1)
    assert only.severity is Severity.NOTE
    assert "development" in only.what


def test_every_finding_says_what_to_do() -> None:
    state = TopicState("t", 1, 1, 1, 1, 1, 1000, 1000, "compact", True)
    found = findings(state, 3)
    assert len(found) >= 6
    assert all(f.fix and f.topic == "t" for f in found)


def test_the_default_policy_keeps_the_ledger_forever_and_leaves_replication_to_the_broker() -> None:
    policy = TopicPolicy()
    assert policy.replication_factor is None
    assert policy.topic_configs() == {
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "cleanup.policy": "delete",
    }
    assert TopicPolicy(min_insync_replicas=2, retention_ms=3_600_000).topic_configs() == {
        "retention.ms": "3600000",
        "retention.bytes": "-1",
        "cleanup.policy": "delete",
        "min.insync.replicas": "2",
    }


def test_a_topic_that_takes_smaller_records_than_the_servers_write_is_a_warning() -> None:
    small = dataclasses.replace(SAFE, max_message_bytes=500_000)
    (only,) = findings(small, 3, record_bytes=1_000_000)
    assert only.severity is Severity.WARNING
    assert only.what.startswith("max.message.bytes 500000 is below the records")
    assert "PINLEDGER_MAX_RECORD_BYTES=500000" in only.fix
    assert findings(SAFE, 3, record_bytes=1_000_000) == []
