"""The log port: what pinledger needs from Kafka, and nothing more.

A queue is a topic (`queue_topic`) with its own number of partitions; a job lives in
one partition for life. Queue lifecycle events go to a one-partition catalog topic
(`catalog_topic`). `append` returns the offsets Kafka assigned once the broker has
acknowledged the records (acks=all, idempotent producer), so an answer to a client is
never given for a record that could still be lost.

The one adapter is `ledger.kafka_log.KafkaLog`; it is the only module that imports
kafka-python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pinledger.ledger.codec import Headers

DEFAULT_TOPIC_PREFIX = "pinledger."


def queue_topic(prefix: str, queue: str) -> str:
    return f"{prefix}q.{queue}"


def catalog_topic(prefix: str) -> str:
    return f"{prefix}catalog"


def queue_of_topic(prefix: str, topic: str) -> str | None:
    head = f"{prefix}q."
    return topic[len(head) :] if topic.startswith(head) else None


class LogError(RuntimeError):
    """The log could not do what was asked; the message says what and what to check."""


@dataclass(frozen=True, slots=True)
class Append:
    topic: str
    partition: int
    value: bytes
    headers: Headers = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LogRecord:
    topic: str
    partition: int
    offset: int
    value: bytes
    headers: Headers


@dataclass(frozen=True, slots=True)
class Position:
    """Where to start reading one partition."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A live member of a consumer group (a server) and the partitions it owns."""

    member_id: str
    partitions: list[tuple[str, int]]


class Reader(Protocol):
    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        """Up to `max_records` records after the previous ones, in log order per
        partition; an empty list when nothing arrived within the timeout."""
        ...

    def close(self) -> None: ...


class Log(Protocol):
    def create_topic(self, topic: str, partitions: int) -> bool:
        """Create a topic; False when it exists already (idempotent)."""
        ...

    def delete_topic(self, topic: str) -> None: ...

    def partition_count(self, topic: str) -> int | None:
        """Partitions of an existing topic, None when there is no such topic."""
        ...

    def topics(self) -> set[str]: ...

    def append(self, appends: Sequence[Append]) -> list[int]:
        """Append records and return their offsets, in order, once acknowledged."""
        ...

    def end_offset(self, topic: str, partition: int) -> int:
        """The offset the next record appended to the partition will get."""
        ...

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """End offsets of many partitions in one request; partitions of topics that do
        not exist (a queue being deleted) are left out."""
        ...

    def reader(self, positions: Sequence[Position]) -> Reader: ...

    def close(self) -> None: ...
