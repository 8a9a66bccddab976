"""How to reach Kafka (where, and how securely) and how the producer batches."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinledger.ledger.log import (
    PRODUCER_MAX_RECORD_BYTES,
    KafkaSecurity,
    SecurityNames,
    TopicPolicy,
)

# What the producers take: above any record the writer makes (its limit,
# PINLEDGER_MAX_RECORD_BYTES, is at most this), so that the broker's limit
# (max.message.bytes) is the one that refuses, with an answer that says so.
MAX_RECORD_BYTES = PRODUCER_MAX_RECORD_BYTES


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap: str = "127.0.0.1:19092"
    # No linger: every call waits for its own append (a dequeue with piggybacked acks
    # waits for two), and 2 ms of linger doubled dequeue latency (p50 ~11 -> ~6 ms at
    # 0) with no throughput gain measured; concurrent calls still share a produce
    # request while one is in flight (bench/, docs/performance-history.md).
    linger_ms: int = 0
    batch_size: int = 256 * 1024
    request_timeout_ms: int = 15_000
    # The longest an append waits for Kafka's acknowledgement (every replica in sync,
    # acks=all) before the call fails; a record may still land after it (the caller
    # sees "may or may not have been applied", as with any lost answer). Longer than
    # a broker crash stalls appends to the partitions it led: Kafka fences a silent
    # broker after broker.session.timeout.ms (9 s by default) and elects new leaders.
    append_timeout_ms: int = 15_000
    # kafka-python backs off reconnecting to a broker that keeps refusing, up to 30 s
    # by default: a client would then go on waiting that long after the broker is
    # back. Java's default is 1 s.
    reconnect_backoff_max_ms: int = 1_000
    # How long a process's first contact (the admin client) tries the bootstrap
    # brokers before it fails, saying why (kafka-python's default).
    bootstrap_timeout_ms: int = 30_000
    client_id: str = "pinledger"
    # How created topics are replicated and how long they keep records.
    topics: TopicPolicy = field(default_factory=TopicPolicy)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)

    def connection(self) -> dict[str, object]:
        """What every kafka-python client of the adapter is built with."""
        return {
            "bootstrap_servers": self.bootstrap,
            "reconnect_backoff_max_ms": self.reconnect_backoff_max_ms,
            **security_options(self.security),
        }


# kafka-python's names of the security settings.
KAFKA_PYTHON = SecurityNames(
    protocol="security_protocol",
    mechanism="sasl_mechanism",
    username="sasl_plain_username",
    password="sasl_plain_password",
    check_hostname="ssl_check_hostname",
    cafile="ssl_cafile",
    certfile="ssl_certfile",
    keyfile="ssl_keyfile",
)


def security_options(security: KafkaSecurity) -> dict[str, object]:
    """kafka-python's settings for this security."""
    return security.options(KAFKA_PYTHON)
