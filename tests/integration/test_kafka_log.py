"""The Kafka adapter against the real broker: what only the adapter does, and its
workarounds of kafka-python's defects (decision 0007). What every Log does is in
tests/contract/test_log_contract.py, run against this adapter and the fake. The group
tests run on the librdkafka adapter too, which delegates group membership here
(decision 0021)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator

import pytest

from pinledger.ledger.adapters import KAFKA_PYTHON, LIBRDKAFKA, KafkaClientLog, open_log
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Append, LogError, queue_topic


@pytest.fixture(params=[KAFKA_PYTHON, LIBRDKAFKA])
def either(request: pytest.FixtureRequest, kafka: KafkaLog) -> Iterator[KafkaClientLog]:
    """The kafka-python adapter, or a librdkafka one (its group membership is this
    adapter's)."""
    if request.param == KAFKA_PYTHON:
        yield kafka
        return
    log = open_log(KafkaSettings(bootstrap=kafka.bootstrap, client_id="group-test"), LIBRDKAFKA)
    yield log
    log.close()


def test_a_deleted_topic_is_not_asked_about_again(
    kafka: KafkaLog, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python's producer keeps asking for the metadata of every topic it ever
    wrote to; for a deleted queue that was an error logged ten times a second, for as
    long as the server ran."""
    own = KafkaLog(KafkaSettings(bootstrap=kafka.bootstrap, client_id="deleted-topic-test"))
    try:
        topic, live = queue_topic(prefix, "short_lived"), queue_topic(prefix, "live")
        own.create_topic(topic, 1)
        own.create_topic(live, 1)
        own.append([Append(topic, 0, b"last words")])
        own.delete_topic(topic)
        with caplog.at_level(logging.ERROR, logger="kafka"):
            # A server's producer keeps writing (claims, acks) to its other queues.
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                own.append([Append(live, 0, b"busy")])
                time.sleep(0.01)
        about_it = [r for r in caplog.records if topic in r.getMessage()]
        # At most a request already in flight when the topic went.
        assert len(about_it) <= 1, [r.getMessage() for r in about_it]
    finally:
        own.close()


def _thread_cpu_s(name_suffix: str, client_id: str) -> float:
    """CPU seconds a thread of this process has used (Linux /proc)."""
    thread = next(
        t
        for t in threading.enumerate()
        if t.name.startswith(client_id) and t.name.endswith(name_suffix)
    )
    with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def test_a_producer_that_wrote_to_a_deleted_topic_does_not_spin(
    kafka: KafkaLog, prefix: str
) -> None:
    """kafka-python's producer keeps every partition it ever wrote to in its accumulator
    and, for one whose leader it cannot find (a deleted queue's topic), asks for
    metadata on every pass of its I/O loop, waking itself up each time: once it writes
    again, a whole core is spent for the rest of the process's life (measured 2.9 s of
    CPU in 3 s), starving the owner's group heartbeats."""
    client_id = f"spin-{os.urandom(3).hex()}"
    own = KafkaLog(KafkaSettings(bootstrap=kafka.bootstrap, client_id=client_id))
    try:
        gone, live = queue_topic(prefix, "deleted_later"), queue_topic(prefix, "live")
        own.create_topic(gone, 2)
        own.create_topic(live, 1)
        own.append([Append(gone, 0, b"a"), Append(gone, 1, b"b")])
        own.delete_topic(gone)
        before = _thread_cpu_s("network-thread", client_id)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # a server keeps writing to its other queues
            own.append([Append(live, 0, b"busy")])
            time.sleep(0.01)
        used = _thread_cpu_s("network-thread", client_id) - before
        # About 0.2 s when it only sends; a spinning thread takes most of the 3 s.
        assert used < 1.0, f"the producer's I/O thread used {used:.2f} s of CPU in 3 s"
    finally:
        own.close()


def test_a_group_member_asked_to_rejoin_gets_its_partitions_assigned_again(
    either: KafkaClientLog, prefix: str
) -> None:
    """The owner's remedy for a topic left out of an assignment: a rejoin makes the
    leader assign every subscribed partition again."""
    topic = queue_topic(prefix, "q")
    either.create_topic(topic, 2)
    assignments: list[list[tuple[str, int]]] = []
    reader = either.group_reader(
        f"{prefix}owners",
        [topic],
        "rejoin-test",
        lambda _: None,
        assignments.append,
    )
    try:

        def poll_until_assigned() -> None:
            deadline = time.monotonic() + 30
            while not (assignments and assignments[-1]) and time.monotonic() < deadline:
                reader.poll(100, 100)
            assert sorted(assignments[-1]) == [(topic, 0), (topic, 1)]

        poll_until_assigned()
        assignments.clear()
        reader.request_rejoin()
        poll_until_assigned()
    finally:
        reader.close()


def test_a_group_member_polling_briefly_gets_each_new_topic(
    either: KafkaClientLog, prefix: str
) -> None:
    """kafka-python 3.0.12 loses a rejoin when the poll's time runs out before SyncGroup
    answers: the new topic is never assigned and the member is evicted (in CI, queues
    created during the test run went unserved). Polls of 5 ms make that race certain;
    every topic the owner subscribes to must still reach it."""
    owned: set[str] = set()
    topics: list[str] = []
    reader = either.group_reader(
        f"{prefix}owners",
        topics,
        "brief-polls",
        lambda _: None,
        lambda keys: owned.update(topic for topic, _ in keys),
    )
    try:
        for name in ("first", "second", "third"):
            topic = queue_topic(prefix, name)
            either.create_topic(topic, 4)
            topics.append(topic)
            reader.subscribe(topics)
            deadline = time.monotonic() + 15
            while topic not in owned and time.monotonic() < deadline:
                reader.poll(100, 5)
            assert topic in owned, f"{topic} was not assigned within 15 s"
    finally:
        reader.close()


class _WedgedProducer:
    """A producer in the state kafka-python's idempotent producer is left in after its
    batches expired while the broker was down: every send times out."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def send(self, *_: object, **__: object) -> None:
        from kafka.errors import KafkaTimeoutError  # noqa: PLC0415 (only this fake)

        raise KafkaTimeoutError("Batch for TopicPartition expired: 30000 ms has passed")

    def close(self, timeout: float | None = None) -> None:
        self.closed.set()


def test_a_producer_that_cannot_deliver_is_replaced(kafka: KafkaLog, prefix: str) -> None:
    own = KafkaLog(KafkaSettings(bootstrap=kafka.bootstrap, client_id="replace-test"))
    try:
        topic = queue_topic(prefix, "wedged")
        own.create_topic(topic, 1)
        [first] = own.append([Append(topic, 0, b"before")])
        wedged = _WedgedProducer()
        own._producer = wedged
        with pytest.raises(LogError, match="KafkaTimeoutError"):
            own.append([Append(topic, 0, b"lost to the outage")])
        # A new producer is built in the background; until it is in, appends fail at
        # once instead of waiting out another delivery timeout. Then they go through,
        # without a restart.
        deadline = time.monotonic() + 30
        while True:
            try:
                offsets = own.append([Append(topic, 0, b"after")])
                break
            except LogError as exc:
                assert "reconnecting" in str(exc), exc
                assert time.monotonic() < deadline, "the producer was never replaced"
                time.sleep(0.05)
        assert offsets == [first + 1]
        assert wedged.closed.wait(10), "the replaced producer was never closed"
    finally:
        own.close()
