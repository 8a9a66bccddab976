"""Is the ledger safe where it is kept? A pure judgement of a topic's settings on a
cluster, used by `pinledger doctor` and the server's start-up check.

The ledger is the only copy of the truth: an acknowledged append must survive the loss
of a broker, and the history must stay as long as replay and traces need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pinledger.ledger.log import TopicState

# Fewer brokers than this is a development cluster: one copy is all there can be.
PRODUCTION_BROKERS = 3


class Severity(StrEnum):
    # An acknowledged job can be lost, or history deleted, with no further fault.
    UNSAFE = "unsafe"
    # Works, with a cost an operator should choose knowingly.
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    topic: str
    what: str
    # What to do about it.
    fix: str


def findings(state: TopicState, brokers: int, record_bytes: int | None = None) -> list[Finding]:
    """What is wrong, or worth knowing, about one topic on a cluster of `brokers`, whose
    records may be up to `record_bytes` (PINLEDGER_MAX_RECORD_BYTES) when given."""
    found: list[Finding] = []

    def add(severity: Severity, what: str, fix: str) -> None:
        found.append(Finding(severity, state.name, what, fix))

    if state.offline:
        add(
            Severity.UNSAFE,
            f"{state.offline} partition(s) have no leader: their queues cannot be served",
            "bring the brokers holding their replicas back",
        )
    if brokers >= PRODUCTION_BROKERS and state.replicas < PRODUCTION_BROKERS:
        add(
            Severity.UNSAFE,
            f"replication factor {state.replicas} on a {brokers}-broker cluster: losing "
            f"{state.replicas} broker(s) loses acknowledged jobs",
            "set PINLEDGER_REPLICATION_FACTOR=3 for new queues and reassign this topic's "
            "partitions to 3 replicas (kafka-reassign-partitions)",
        )
    elif brokers < PRODUCTION_BROKERS:
        add(
            Severity.NOTE,
            f"a {brokers}-broker cluster keeps {state.replicas} copy(ies): fine for "
            "development, not for production",
            "run 3 or more brokers in production",
        )
    if state.replicas > 1 and state.min_insync_replicas < 2:
        add(
            Severity.UNSAFE,
            f"min.insync.replicas {state.min_insync_replicas} with {state.replicas} "
            "replicas: an acknowledged append may be on one broker only",
            "set PINLEDGER_MIN_INSYNC_REPLICAS=2 (or the topic's min.insync.replicas)",
        )
    elif state.replicas > 1 and state.min_insync_replicas >= state.replicas:
        add(
            Severity.WARNING,
            f"min.insync.replicas {state.min_insync_replicas} equals the replicas: one "
            "broker down stops every append to this topic",
            f"set min.insync.replicas to {state.replicas - 1}",
        )
    if state.unclean_leader_election:
        add(
            Severity.UNSAFE,
            "unclean.leader.election.enable is true: an out-of-sync replica may become "
            "leader and drop acknowledged records",
            "set unclean.leader.election.enable=false on the topic",
        )
    if "compact" in state.cleanup_policy:
        add(
            Severity.UNSAFE,
            f"cleanup.policy {state.cleanup_policy}: compaction deletes ledger history",
            "set cleanup.policy=delete with retention.ms=-1",
        )
    if state.retention_ms >= 0:
        add(
            Severity.WARNING,
            f"retention {state.retention_ms / 3_600_000:g} h: older records are deleted, "
            "so replay from the start and the history of older jobs lose them",
            "set retention.ms=-1 to keep the ledger (the default of PINLEDGER_RETENTION_DAYS)",
        )
    if state.retention_bytes >= 0:
        add(
            Severity.WARNING,
            f"retention.bytes {state.retention_bytes}: past that size records are deleted",
            "set retention.bytes=-1",
        )
    if record_bytes is not None and state.max_message_bytes < record_bytes:
        add(
            Severity.WARNING,
            f"max.message.bytes {state.max_message_bytes} is below the records pinledger "
            f"writes (up to {record_bytes} bytes, PINLEDGER_MAX_RECORD_BYTES): the broker "
            "refuses the bigger ones, and an enqueue or ack that needs one fails",
            f"set max.message.bytes={record_bytes} on the topic, or "
            f"PINLEDGER_MAX_RECORD_BYTES={state.max_message_bytes}",
        )
    if state.under_replicated:
        add(
            Severity.WARNING,
            f"{state.under_replicated} partition(s) are under-replicated",
            "check the brokers that fell behind",
        )
    return found
