"""Choosing a Log adapter by its client's name, and the librdkafka adapter's error
policy (no broker needed)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from pinledger.ledger.adapters import CLIENTS, open_log
from pinledger.ledger.kafka import KafkaSettings
from pinledger.ledger.rdkafka.errors import log_error


def test_an_unknown_client_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="kafka-python, librdkafka"):
        open_log(KafkaSettings(), "java")
    assert CLIENTS == ("kafka-python", "librdkafka")


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        (KafkaError._TRANSPORT, "is running"),
        (KafkaError._MSG_TIMED_OUT, "is running"),
        (KafkaError._ALL_BROKERS_DOWN, "is running"),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "queue may have been deleted"),
        (KafkaError._UNKNOWN_PARTITION, "partition count"),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "ACLs"),
        (KafkaError.MSG_SIZE_TOO_LARGE, "max.message.bytes"),
        (KafkaError.INVALID_REPLICATION_FACTOR, "broker's log"),
    ],
)
def test_every_librdkafka_error_says_what_to_check(code: int, hint: str) -> None:
    error = log_error(KafkaError(code, "the reason"), "cannot append", "kafka:9092")
    assert str(error).startswith("cannot append: ")
    assert "the reason" in str(error)
    assert hint in str(error)
