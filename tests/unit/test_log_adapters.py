"""Choosing a Log adapter by its client's name, and the librdkafka adapter's error
policy (no broker needed)."""

from __future__ import annotations

from typing import cast

import pytest
from confluent_kafka import KafkaError, Message

from pinledger.ledger.adapters import CLIENTS, open_log
from pinledger.ledger.kafka import KafkaSettings
from pinledger.ledger.log import NotAppendedError, RecordTooLargeError
from pinledger.ledger.rdkafka.errors import log_error, unwritten
from pinledger.ledger.rdkafka.producer import _Delivery


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


class _Message:
    def offset(self) -> int:
        return 7


MESSAGE = cast(Message, _Message())


def test_librdkafka_says_nothing_was_written_only_when_every_record_was_refused() -> None:
    too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    both = _Delivery(2)
    both.report(0, too_large, MESSAGE)
    both.report(1, KafkaError(KafkaError._PURGE_QUEUE), MESSAGE)
    assert both.unwritten
    one = _Delivery(2)
    one.report(0, None, MESSAGE)
    one.report(1, too_large, MESSAGE)
    assert not one.unwritten, "a record of the append was delivered"
    lost = _Delivery(1)
    lost.report(0, KafkaError(KafkaError._MSG_TIMED_OUT), MESSAGE)
    assert not lost.unwritten, "a timed-out record may still land"
    assert unwritten(too_large) is RecordTooLargeError
    assert unwritten(KafkaError(KafkaError._UNKNOWN_PARTITION)) is NotAppendedError
