"""The Kafka adapter's start-up check and error translation, without a broker."""

from __future__ import annotations

import asyncio
import select
import selectors
import socket

import kafka
import pytest
from kafka import TopicPartition
from kafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
)
from kafka.net.inet import KafkaNetSocket
from kafka.net.selector import NetworkSelector
from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

from pinledger.ledger.kafka import TESTED_KAFKA_PYTHON, patches
from pinledger.ledger.kafka.errors import log_error, translated
from pinledger.ledger.kafka.log import _kind
from pinledger.ledger.log import LogError, NotAppendedError, RecordTooLargeError


def test_the_installed_kafka_python_is_a_tested_one() -> None:
    assert kafka.__version__ in TESTED_KAFKA_PYTHON
    patches.check_kafka_python()


def test_an_untested_kafka_python_is_refused_naming_both_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    patches.check_kafka_python.cache_clear()
    monkeypatch.setattr(kafka, "__version__", "3.9.0")
    try:
        with pytest.raises(LogError) as refused:
            patches.check_kafka_python()
        message = str(refused.value)
        assert "kafka-python 3.9.0 is installed" in message
        assert all(version in message for version in TESTED_KAFKA_PYTHON)
    finally:
        patches.check_kafka_python.cache_clear()


class _WaitingNet:
    """What kafka-python's sock_connect awaits while a connect is in progress."""

    async def wait_write(self, sock: socket.socket, timeout_at: float | None = None) -> None:
        select.select([], [sock], [], 2)


def test_a_failed_broker_connect_closes_its_socket() -> None:
    # Nothing listens on a port just freed: the connect is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = probe.getsockname()
    patches.check_kafka_python()
    sock = socket.socket()
    sock.setblocking(False)
    try:
        with pytest.raises(KafkaConnectionError):
            asyncio.run(KafkaNetSocket().sock_connect(_WaitingNet(), sock, address))
        assert sock.fileno() == -1, "kafka-python left the failed connect's socket open"
    finally:
        sock.close()


def test_a_kafka_error_becomes_a_log_error_saying_what_to_check() -> None:
    with pytest.raises(LogError) as raised, translated("cannot list the topics", "h:1"):
        raise KafkaTimeoutError("Unable to bootstrap from h:1")
    message = str(raised.value)
    assert message.startswith("cannot list the topics: KafkaTimeoutError: ")
    assert "broker at h:1 is running" in message
    assert isinstance(raised.value.__cause__, KafkaTimeoutError)


def test_a_missing_topic_is_named_as_such() -> None:
    error = log_error(UnknownTopicOrPartitionError(), "cannot append", "h:1")
    assert "topic does not exist" in str(error)


class _NoRepr(socket.socket):
    """A socket whose repr must not be asked for (but by an error message)."""

    allowed = False

    def __repr__(self) -> str:
        if not self.allowed:
            raise AssertionError("repr(socket) was formatted")
        return "<the socket>"


def test_registering_io_events_keeps_kafka_pythons_semantics_without_formatting_repr() -> None:
    patches.register_without_repr()
    selector = NetworkSelector()
    sock = _NoRepr(socket.AF_INET, socket.SOCK_STREAM)
    try:
        selector.register_event(sock, selectors.EVENT_READ, lambda: None)  # new: register
        key = selector._selector.get_key(sock)
        assert key.events == selectors.EVENT_READ
        selector.register_event(sock, selectors.EVENT_WRITE, lambda: None)  # add: modify
        key = selector._selector.get_key(sock)
        assert key.events == selectors.EVENT_READ | selectors.EVENT_WRITE
        reader, writer = key.data
        assert reader is not None and writer is not None
        sock.allowed = True  # the error names the socket, as kafka-python's does
        with pytest.raises(RuntimeError, match="EVENT_READ already registered"):
            selector.register_event(sock, selectors.EVENT_READ, lambda: None)
    finally:
        sock.close()
        selector.close()


def _future(error: Exception | None = None, done: bool = True) -> FutureRecordMetadata:
    future = FutureRecordMetadata(FutureProduceResult(TopicPartition("t", 0)), 0, 0, 0, 1, 1, 0)
    if done and error is not None:
        future.failure(error)
    elif done:
        future.success(None)
    return future


def test_a_failed_append_says_nothing_was_written_only_when_every_record_was_refused() -> None:
    too_large = MessageSizeTooLargeError("broker: too large")
    refused = [_future(too_large), _future(MessageSizeTooLargeError("too"))]
    assert _kind(too_large, refused) is RecordTooLargeError
    # send() raised before the first record was queued: nothing went out.
    assert _kind(KafkaTimeoutError("no metadata"), []) is NotAppendedError
    # One record delivered, or still on its way: the others' refusal settles nothing.
    assert _kind(too_large, [_future(too_large), _future()]) is LogError
    assert _kind(too_large, [_future(too_large), _future(done=False)]) is LogError
    timeout = KafkaTimeoutError("no answer")
    assert _kind(timeout, [_future(timeout)]) is LogError
