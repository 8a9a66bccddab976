"""The Kafka adapter of the log port (`ledger.log.Log`), on kafka-python 3.

The only module that imports kafka-python. One producer per process (it is
thread-safe and batches concurrent appends into the same produce requests); readers
are plain assigned consumers with no group, reading from explicit offsets kept in
Postgres next to the rows they produced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from ledger.log import Append, LogError, LogRecord, Position

log = logging.getLogger(__name__)

# Enough for the largest job body (commands.Limits) plus the envelope around it.
MAX_RECORD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap: str = "127.0.0.1:19092"
    # A few milliseconds of linger lets concurrent calls share one produce request;
    # the benchmark (bench/) measures the trade against latency.
    linger_ms: int = 2
    batch_size: int = 256 * 1024
    request_timeout_ms: int = 15_000
    client_id: str = "pinledger"


class KafkaReader:
    def __init__(self, settings: KafkaSettings, positions: Sequence[Position]) -> None:
        self._consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap,
            client_id=f"{settings.client_id}-reader",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=32 * 1024 * 1024,
        )
        partitions = [TopicPartition(p.topic, p.partition) for p in positions]
        self._consumer.assign(partitions)
        for position, partition in zip(positions, partitions, strict=True):
            self._consumer.seek(partition, position.offset)

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        batches = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
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

    def close(self) -> None:
        self._consumer.close()


class KafkaLog:
    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=settings.bootstrap,
                client_id=settings.client_id,
                acks="all",
                enable_idempotence=True,
                linger_ms=settings.linger_ms,
                batch_size=settings.batch_size,
                max_request_size=MAX_RECORD_BYTES,
                request_timeout_ms=settings.request_timeout_ms,
            )
            self._admin = KafkaAdminClient(
                bootstrap_servers=settings.bootstrap, client_id=f"{settings.client_id}-admin"
            )
        except KafkaError as exc:
            raise LogError(
                f"cannot reach Kafka at {settings.bootstrap}: {exc}. Start it with "
                "`make stack-up`, or point PINLEDGER_KAFKA at your broker."
            ) from exc

    @property
    def bootstrap(self) -> str:
        return self._settings.bootstrap

    def create_topic(self, topic: str, partitions: int) -> bool:
        try:
            self._admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": 1}},
                wait_for_metadata=True,
            )
        except TopicAlreadyExistsError:
            return False
        return True

    def delete_topic(self, topic: str) -> None:
        try:
            self._admin.delete_topics([topic])
        except UnknownTopicOrPartitionError:
            return
        # Deletion is asynchronous in Kafka; wait so that a queue created again under
        # the same name gets a fresh topic, not the one being deleted.
        deadline = time.monotonic() + 30
        while topic in self.topics():
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic} is still being deleted after 30 s")
            time.sleep(0.05)

    def partition_count(self, topic: str) -> int | None:
        described: list[dict[str, Any]] = self._admin.describe_topics([topic])
        for info in described:
            if info.get("name") == topic and info.get("error_code", 0) == 0:
                return len(info.get("partitions") or [])
        return None

    def topics(self) -> set[str]:
        return set(self._admin.list_topics())

    def append(self, appends: Sequence[Append]) -> list[int]:
        futures = [
            self._producer.send(a.topic, value=a.value, partition=a.partition, headers=a.headers)
            for a in appends
        ]
        # No flush(): the producer sends when batches fill or linger passes, and
        # concurrent callers share those requests; waiting on our own futures suffices.
        timeout = self._settings.request_timeout_ms / 1000 * 2
        try:
            return [f.get(timeout=timeout).offset for f in futures]
        except KafkaError as exc:
            raise LogError(f"append to Kafka at {self._settings.bootstrap} failed: {exc}") from exc

    def end_offset(self, topic: str, partition: int) -> int:
        ends = self.end_offsets([(topic, partition)])
        if (topic, partition) not in ends:
            raise LogError(f"no partition {partition} of topic {topic} in Kafka")
        return ends[(topic, partition)]

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        existing = self.topics()
        wanted = [TopicPartition(t, p) for t, p in partitions if t in existing]
        if not wanted:
            return {}
        # The admin client's ListOffsets refreshes metadata for topics it has not seen
        # yet; a plain consumer's end_offsets drops such partitions from its answer.
        offsets = self._admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in wanted})
        return {(tp.topic, tp.partition): found.offset for tp, found in offsets.items()}

    def reader(self, positions: Sequence[Position]) -> KafkaReader:
        return KafkaReader(self._settings, positions)

    def close(self) -> None:
        self._producer.close()
        self._admin.close()
