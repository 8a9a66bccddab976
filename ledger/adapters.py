"""The one place a Log adapter is chosen, by the name of its Kafka client: "librdkafka"
(ledger/rdkafka/, the server's default: appends and readers on confluent-kafka, group
membership and admin calls on kafka-python) or "kafka-python" (ledger/kafka/;
docs/decisions/0021-librdkafka-adapter.md). Both take the same KafkaSettings and both
are a Log and a LogInspector."""

from __future__ import annotations

from typing import Protocol

from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Log, LogInspector

KAFKA_PYTHON = "kafka-python"
LIBRDKAFKA = "librdkafka"
CLIENTS = (KAFKA_PYTHON, LIBRDKAFKA)


class KafkaClientLog(Log, LogInspector, Protocol):
    """What either adapter is: the log, what `doctor` reads, and where it connects."""

    @property
    def bootstrap(self) -> str: ...


def open_log(settings: KafkaSettings, client: str) -> KafkaClientLog:
    """The Log on Kafka through `client`; ValueError naming the choices for another name.
    LogError when Kafka cannot be reached."""
    if client == KAFKA_PYTHON:
        return KafkaLog(settings)
    if client == LIBRDKAFKA:
        # Imported here: a process on kafka-python never loads librdkafka.
        from pinledger.ledger.rdkafka import RdkafkaLog  # noqa: PLC0415

        return RdkafkaLog(settings)
    raise ValueError(f"unknown Kafka client {client!r}: choose one of {', '.join(CLIENTS)}")
