"""How to reach Kafka and how the producer batches."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinledger.ledger.log import TopicPolicy

# Enough for the largest job body (commands.Limits) plus the envelope around it.
MAX_RECORD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap: str = "127.0.0.1:19092"
    # No linger: every call waits for its own append (a dequeue with piggybacked acks
    # waits for two), and 2 ms of linger doubled dequeue latency (p50 ~11 -> ~6 ms at
    # 0) with no throughput gain measured; concurrent calls still share a produce
    # request while one is in flight (bench/, docs/performance.md).
    linger_ms: int = 0
    batch_size: int = 256 * 1024
    request_timeout_ms: int = 15_000
    client_id: str = "pinledger"
    # How created topics are replicated and how long they keep records.
    topics: TopicPolicy = field(default_factory=TopicPolicy)
