"""The plain partition reader on librdkafka: a consumer assigned partitions at explicit
offsets, in no group (the projection keeps its offsets in Postgres)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from pinledger.ledger.codec import Headers
from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import LogError, LogRecord, Position
from pinledger.ledger.rdkafka import config
from pinledger.ledger.rdkafka.errors import UNREACHABLE, error_of, log_error

log = logging.getLogger(__name__)


def _record(message: Message) -> LogRecord:
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    # Set on every message that carries no error (the caller checked).
    assert topic is not None and partition is not None and offset is not None
    value = message.value()
    return LogRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        value=b"" if value is None else bytes(value),
        headers=_headers(message),
    )


def _headers(message: Message) -> Headers:
    """A consumed message's headers are a list of (key, bytes or None); confluent-kafka's
    type also allows a dict and str values, which only a producer is given."""
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [
        (key, value.encode() if isinstance(value, str) else value or b"") for key, value in pairs
    ]


class RdkafkaReader:
    """Implements ledger.log.Reader."""

    def __init__(self, settings: KafkaSettings, positions: Sequence[Position]) -> None:
        self._bootstrap = settings.bootstrap
        self._failed: LogError | None = None
        try:
            self._consumer = Consumer(config.reader(settings))
            self._consumer.assign(
                [TopicPartition(p.topic, p.partition, p.offset) for p in positions]
            )
        except KafkaException as exc:
            raise log_error(error_of(exc), "cannot start a reader", self._bootstrap) from exc

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        """What has arrived, at once; else waits for the first record. librdkafka's
        consume() waits until it has `num_messages` or the timeout passed, so a reader
        asking for 1,000 would sit out its whole timeout with records at hand: take
        what is queued without waiting, and wait (poll) only when nothing is."""
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        try:
            messages = self._consumer.consume(num_messages=max_records, timeout=0)
            if not messages:
                first = self._consumer.poll(timeout_ms / 1000)
                if first is None:
                    return []
                messages = [first]
                if max_records > 1:
                    messages += self._consumer.consume(num_messages=max_records - 1, timeout=0)
        except KafkaException as exc:
            raise log_error(error_of(exc), "cannot read from Kafka", self._bootstrap) from exc
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(_record(message))
            elif error.code() in UNREACHABLE:
                # Passing: librdkafka reconnects and fetches on by itself.
                log.info("reader: %s", error.str())
            elif self._failed is None:
                # A partition that cannot be read (deleted, not authorized): what came
                # before is returned, the next poll fails.
                where = f"{message.topic()}[{message.partition()}]"
                self._failed = log_error(error, f"cannot read {where} from Kafka", self._bootstrap)
        return records

    def close(self) -> None:
        try:
            self._consumer.close()
        except KafkaException as exc:
            raise log_error(error_of(exc), "cannot close a reader", self._bootstrap) from exc
