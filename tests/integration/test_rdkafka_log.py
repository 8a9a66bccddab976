"""The librdkafka adapter against the real broker: what only this adapter does (its
producer's thread of delivery reports, its reader's polls, its error policy). What every
Log does is in tests/contract/test_log_contract.py, run against this adapter too."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError

from pinledger.ledger.adapters import LIBRDKAFKA, KafkaClientLog, open_log
from pinledger.ledger.kafka import MAX_RECORD_BYTES, KafkaLog, KafkaSettings
from pinledger.ledger.log import Append, LogError, LogRecord, Position, TopicPolicy, queue_topic
from pinledger.ledger.rdkafka.producer import Appender
from tests.contract.test_log_contract import Member, _eventually


@pytest.fixture
def own(kafka: KafkaLog) -> Iterator[KafkaClientLog]:
    """A librdkafka log of the test's own, with a short append timeout."""
    log = open_log(
        KafkaSettings(bootstrap=kafka.bootstrap, client_id="rdkafka-test", append_timeout_ms=3000),
        LIBRDKAFKA,
    )
    yield log
    log.close()


def _librdkafka_cpu_s() -> float:
    """CPU seconds used by librdkafka's own threads in this process (named rdk:...)."""
    ticks = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if not comm.read().startswith("rdk:"):
                    continue
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def test_a_deleted_topic_leaves_the_producer_quiet_and_an_append_to_it_names_it(
    own: KafkaClientLog, prefix: str
) -> None:
    """What kafka-python needed workarounds for (decision 0007): after a topic it wrote
    to is deleted, the producer neither spins nor keeps failing the other topics, and an
    append to the deleted one fails saying the topic is gone, not that Kafka is down."""
    gone, live = queue_topic(prefix, "deleted_later"), queue_topic(prefix, "live")
    own.create_topic(gone, 2)
    own.create_topic(live, 1)
    own.append([Append(gone, 0, b"a"), Append(gone, 1, b"b")])
    own.delete_topic(gone)
    own.forget_deleted_topics()
    before = _librdkafka_cpu_s()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # a server keeps writing to its other queues
        own.append([Append(live, 0, b"busy")])
        time.sleep(0.01)
    used = _librdkafka_cpu_s() - before
    assert used < 1.0, f"librdkafka's threads used {used:.2f} s of CPU in 3 s"
    with pytest.raises(LogError, match=f"no topic {gone}"):
        own.append([Append(gone, 0, b"too late")])
    # The unanswered append made the producer ask whether a broker answers: one does,
    # so the other topics are appended to again at once.
    deadline = time.monotonic() + 2
    while True:
        try:
            own.append([Append(live, 0, b"still busy")])
            break
        except LogError as exc:
            assert "reconnecting" in str(exc) and time.monotonic() < deadline, exc
            time.sleep(0.01)


def test_a_record_over_the_limit_is_refused_at_once(own: KafkaClientLog, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    own.create_topic(topic, 1)
    started = time.monotonic()
    with pytest.raises(LogError, match="MSG_SIZE_TOO_LARGE"):
        own.append([Append(topic, 0, b"x" * (MAX_RECORD_BYTES + 1))])
    assert time.monotonic() - started < 1.0
    assert own.append([Append(topic, 0, b"small")]) == [0]


def test_a_reader_returns_what_has_arrived_without_waiting_out_its_timeout(
    own: KafkaClientLog, prefix: str
) -> None:
    """librdkafka's consume() waits for all the records asked for or the timeout: a
    reader asking for 1,000 must still return the 5 there are at once."""
    topic = queue_topic(prefix, "q")
    own.create_topic(topic, 1)
    own.append([Append(topic, 0, f"r{i}".encode()) for i in range(5)])
    reader = own.reader([Position(topic, 0, 0)])
    try:
        started = time.monotonic()
        records: list[LogRecord] = []
        while len(records) < 5 and time.monotonic() - started < 20:
            records += reader.poll(1000, 5000)
        assert [r.offset for r in records] == list(range(5))
        assert time.monotonic() - started < 2.5, "a poll sat out its timeout"
    finally:
        reader.close()


def test_a_producer_that_failed_for_good_is_replaced(own: KafkaClientLog, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    own.create_topic(topic, 1)
    [first] = own.append([Append(topic, 0, b"before")])
    appender = own._appender  # type: ignore[attr-defined]
    failed = appender._producer
    # What librdkafka's error callback is told when the producer cannot go on.
    appender._on_error(KafkaError(KafkaError._FATAL, "simulated", fatal=True))
    assert own.append([Append(topic, 0, b"after")]) == [first + 1]
    assert appender._producer is not failed


def test_while_no_broker_answers_only_the_first_append_waits_out_its_timeout() -> None:
    """As with the kafka-python adapter (docs/operations/failure-modes.md): in an outage the
    first calls wait at most the append timeout, the others fail at once."""
    appender = Appender(KafkaSettings(bootstrap="127.0.0.1:9", append_timeout_ms=1000))
    try:
        started = time.monotonic()
        with pytest.raises(LogError, match="is running and not overloaded"):
            appender.append([Append("pinledger.q.nowhere", 0, b"lost")])
        assert time.monotonic() - started < 3
        started = time.monotonic()
        with pytest.raises(LogError, match="reconnecting"):
            appender.append([Append("pinledger.q.nowhere", 0, b"also lost")])
        assert time.monotonic() - started < 0.5
    finally:
        appender.close()


def test_appends_resume_once_a_broker_answers(kafka: KafkaLog, prefix: str) -> None:
    topic = queue_topic(prefix, "q")
    kafka.create_topic(topic, 1)
    appender = Appender(KafkaSettings(bootstrap=kafka.bootstrap, client_id="rdkafka-probe"))
    try:
        # What an unanswered append leaves behind; here the broker answers the probe.
        appender._start_probe(topic)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert appender.append([Append(topic, 0, b"after")]) == [0]
                break
            except LogError as exc:
                assert "reconnecting" in str(exc), exc
                assert time.monotonic() < deadline, "appends never resumed"
                time.sleep(0.05)
    finally:
        appender.close()


def test_members_on_either_adapter_share_one_owners_group(
    kafka: KafkaLog, own: KafkaClientLog, prefix: str
) -> None:
    """Group membership is kafka-python's in both adapters (decision 0021): a server on
    librdkafka joins the owners' group of servers on kafka-python, with the same
    assignor, so the adapter can be switched one server at a time."""
    topic, group = queue_topic(prefix, "q"), f"{prefix}owners"
    kafka.create_topic(topic, 4)
    everything = [(topic, p) for p in range(4)]
    with (
        Member(kafka, group, [topic], "on-kafka-python") as old,
        Member(own, group, [topic], "on-librdkafka") as new,
    ):

        def shared() -> bool:
            a, b = old.held(), new.held()
            return bool(a) and bool(b) and sorted(a + b) == everything

        _eventually("the partitions shared by both members", shared)

        def described() -> bool:
            members = {m.member_id: sorted(m.partitions) for m in own.group_members(group)}
            return members == {"on-kafka-python": old.held(), "on-librdkafka": new.held()}

        _eventually("group_members lists both with their partitions", described)


def test_topics_get_the_policy_and_both_adapters_report_them_alike(
    kafka: KafkaLog, prefix: str
) -> None:
    policy = TopicPolicy(min_insync_replicas=1, retention_ms=3_600_000)
    log = open_log(
        KafkaSettings(bootstrap=kafka.bootstrap, client_id="rdkafka-policy", topics=policy),
        LIBRDKAFKA,
    )
    try:
        topic = queue_topic(prefix, "short")
        assert log.create_topic(topic, 3)
        state = log.topic_states([topic, queue_topic(prefix, "missing")])
        assert set(state) == {topic}
        assert (state[topic].partitions, state[topic].offline) == (3, 0)
        assert (state[topic].retention_ms, state[topic].min_insync_replicas) == (3_600_000, 1)
        assert (state[topic].retention_bytes, state[topic].cleanup_policy) == (-1, "delete")
        assert state == kafka.topic_states([topic])
        assert log.broker_count() == kafka.broker_count()
    finally:
        log.close()
