"""The plain partition reader: an assigned consumer with no group, reading from
explicit offsets (the projection keeps them in Postgres next to the rows they made)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from pinledger.ledger.kafka.errors import translated
from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import LogRecord, Position

# Large fetches: a reader catches up whole partitions at once.
MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
FETCH_MAX_BYTES = 32 * 1024 * 1024


def to_records(batches: dict[Any, Any]) -> list[LogRecord]:
    """kafka-python's batches of messages by partition, as the port's records."""
    records: list[LogRecord] = []
    for tp, messages in batches.items():
        records.extend(
            LogRecord(
                topic=tp.topic,
                partition=tp.partition,
                offset=m.offset,
                value=m.value,
                headers=list(m.headers or ()),
            )
            for m in messages
        )
    return records


class KafkaReader:
    """Implements ledger.log.Reader."""

    def __init__(self, settings: KafkaSettings, positions: Sequence[Position]) -> None:
        self._bootstrap = settings.bootstrap
        with translated("cannot start a reader", settings.bootstrap):
            self._consumer = KafkaConsumer(
                **settings.connection(),
                client_id=f"{settings.client_id}-reader",
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
                fetch_max_bytes=FETCH_MAX_BYTES,
                allow_auto_create_topics=False,
            )
            partitions = [TopicPartition(p.topic, p.partition) for p in positions]
            self._consumer.assign(partitions)
            for position, partition in zip(positions, partitions, strict=True):
                self._consumer.seek(partition, position.offset)

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        with translated("cannot read from Kafka", self._bootstrap):
            batches = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        return to_records(batches)

    def close(self) -> None:
        with translated("cannot close a reader", self._bootstrap):
            self._consumer.close()
