"""The Kafka adapter of the log port (`ledger.log.Log`): the producer, and the admin
client (admin.py) for everything but appends and reads. One producer per process (it
is thread-safe and batches concurrent appends into the same produce requests); readers
and group members are their own consumers (reader.py, group.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence

from kafka import KafkaProducer
from kafka.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka.producer.future import FutureRecordMetadata

from pinledger.ledger.kafka import patches
from pinledger.ledger.kafka.admin import KafkaAdmin
from pinledger.ledger.kafka.errors import log_error, translated
from pinledger.ledger.kafka.group import KafkaGroupReader, KafkaSubscriber
from pinledger.ledger.kafka.membership import KafkaGroupMembership
from pinledger.ledger.kafka.reader import KafkaReader
from pinledger.ledger.kafka.settings import MAX_RECORD_BYTES, KafkaSettings
from pinledger.ledger.known_partitions import learn_partition
from pinledger.ledger.log import (
    Append,
    GroupMember,
    LogError,
    NotAppendedError,
    PartitionKey,
    PartitionsCallback,
    Position,
    RecordTooLargeError,
    TopicState,
)

log = logging.getLogger(__name__)

# Errors about one record or topic, which a new producer would meet again.
_RECORD_ERRORS = (
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
    TopicAuthorizationFailedError,
    InvalidTopicError,
)
# The broker's answers that a record was not written, whatever came before (the size
# of a record does not change between attempts: no earlier attempt of it landed).
_REFUSED = (MessageSizeTooLargeError, RecordListTooLargeError, InvalidTopicError)
# Building a replacement producer is retried with this backoff while Kafka is down.
_REPLACE_FIRST_PAUSE_S = 0.5
_REPLACE_MAX_PAUSE_S = 5.0
_CLOSE_TIMEOUT_S = 5.0


def _close_quietly(producer: KafkaProducer) -> None:
    try:
        producer.close(timeout=_CLOSE_TIMEOUT_S)
    except Exception as exc:  # it could not deliver; that is why it is being replaced
        log.debug("closing the replaced producer: %s", exc)


class KafkaLog:
    """Implements ledger.log.Log."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._producer_lock = threading.Lock()
        self._replacing = False
        self._closed = threading.Event()
        # First: it checks the kafka-python version (patches) and fails at once when
        # Kafka cannot be reached.
        self._admin = KafkaAdmin(settings)
        # Group membership, as the librdkafka adapter has it too (membership.py).
        self._groups = KafkaGroupMembership(settings)
        try:
            with translated(f"cannot reach Kafka at {settings.bootstrap}", settings.bootstrap):
                self._producer = self._new_producer()
        except LogError:
            self._admin.close()
            raise

    def _send(self, producer: KafkaProducer, a: Append, deadline: float) -> FutureRecordMetadata:
        try:
            return producer.send(a.topic, value=a.value, partition=a.partition, headers=a.headers)
        except ValueError:  # kafka-python: "Unrecognized partition"
            # A partition added since the producer read the metadata: ask again.
            left = deadline - time.monotonic()
            if not learn_partition(
                a.topic,
                a.partition,
                lambda topic: len(producer.partitions_for(topic) or ()),
                lambda _: patches.request_metadata_update(producer),
                left,
            ):
                raise NotAppendedError(
                    f"append to Kafka at {self.bootstrap} failed: topic {a.topic} has no "
                    f"partition {a.partition}: check the queue's partition count"
                ) from None
            return producer.send(a.topic, value=a.value, partition=a.partition, headers=a.headers)

    def _new_producer(self) -> KafkaProducer:
        settings = self._settings
        return KafkaProducer(
            **settings.connection(),
            client_id=settings.client_id,
            acks="all",
            enable_idempotence=True,
            linger_ms=settings.linger_ms,
            batch_size=settings.batch_size,
            max_request_size=MAX_RECORD_BYTES,
            # Below the delivery timeout (kafka-python requires it), leaving time for
            # a retry within it.
            request_timeout_ms=min(settings.request_timeout_ms, settings.append_timeout_ms // 2),
            # An append to a topic that does not exist (a queue deleted through
            # another server a moment ago) fails after this, instead of 60 s.
            max_block_ms=settings.append_timeout_ms,
            # No longer than `append` waits for an answer: kafka-python's I/O thread
            # spins while it holds an undeliverable record.
            delivery_timeout_ms=settings.append_timeout_ms,
            # A queue is a topic only createQueue makes: a send (or a metadata
            # request) for a deleted queue must not bring its topic back on a broker
            # with auto.create.topics.enable (Kafka's default).
            allow_auto_create_topics=False,
        )

    def _replace_producer(self, reason: Exception) -> None:
        """Start over with a new producer after one could not deliver (the broker was
        down past the delivery timeout): kafka-python's idempotent producer does not
        recover from expired batches by itself, and every later append timed out even
        once Kafka was back. The new producer is built on a thread of its own, retried
        with backoff until Kafka answers (building one blocks while no broker does), so
        no caller waits on it and the swap happens as soon as Kafka is back; the old
        producer is closed there too."""
        with self._producer_lock:
            if self._replacing or self._closed.is_set():
                return
            self._replacing = True
        log.warning(
            "the Kafka producer failed to deliver (%s: %s); replacing it",
            type(reason).__name__,
            reason,
        )
        threading.Thread(target=self._replace, name="producer-replace", daemon=True).start()

    def _replace(self) -> None:
        pause = _REPLACE_FIRST_PAUSE_S
        try:
            while not self._closed.is_set():
                try:
                    fresh = self._new_producer()
                except Exception as exc:  # no broker answers yet
                    log.info("cannot build a new Kafka producer yet (%s); retrying", exc)
                    self._closed.wait(pause)
                    pause = min(pause * 2, _REPLACE_MAX_PAUSE_S)
                    continue
                with self._producer_lock:
                    old, self._producer = self._producer, fresh
                log.warning("replaced the Kafka producer")
                _close_quietly(old)
                return
        finally:
            with self._producer_lock:
                self._replacing = False

    @property
    def bootstrap(self) -> str:
        return self._settings.bootstrap

    def create_topic(self, topic: str, partitions: int, keep_forever: bool = False) -> bool:
        return self._admin.create_topic(topic, partitions, keep_forever)

    def delete_topic(self, topic: str) -> None:
        self._admin.delete_topic(topic)
        self.forget_deleted_topics()

    def partition_count(self, topic: str) -> int | None:
        return self._admin.partition_count(topic)

    def add_partitions(self, topic: str, total: int) -> bool:
        return self._admin.add_partitions(topic, total)

    def topics(self) -> set[str]:
        return self._admin.topics()

    def existing(self, topics: Iterable[str]) -> set[str]:
        return self._admin.existing(topics)

    def broker_count(self) -> int:
        return self._admin.broker_count()

    def topic_states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        return self._admin.topic_states(topics)

    def forget_deleted_topics(self) -> None:
        """Make the producer forget the topics it wrote to that no longer exist
        (patches.forget_deleted); a server calls it every few seconds."""
        tracked = patches.producer_topics(self._producer)
        if tracked:
            patches.forget_deleted(self._producer, self.existing(tracked))

    def append(self, appends: Sequence[Append]) -> list[int]:
        # No flush(): the producer sends when batches fill or linger passes, and
        # concurrent callers share those requests; waiting on our own futures suffices.
        with self._producer_lock:
            producer, replacing = self._producer, self._replacing
        what = f"append to Kafka at {self.bootstrap} failed"
        if replacing:
            # The producer could not deliver and no broker has answered since: fail at
            # once rather than make every caller wait out the delivery timeout again.
            raise log_error(
                KafkaTimeoutError("no broker has answered since the last failed delivery"),
                f"{what} (reconnecting)",
                self.bootstrap,
                NotAppendedError,
            )
        deadline = time.monotonic() + self._settings.append_timeout_ms / 1000
        futures: list[FutureRecordMetadata] = []
        try:
            for a in appends:
                futures.append(self._send(producer, a, deadline))
            return [f.get(timeout=max(0.001, deadline - time.monotonic())).offset for f in futures]
        except NotAppendedError as exc:  # from _send: that record was never queued
            if futures:
                raise LogError(f"{exc} (the records before it may be in the log)") from exc
            raise
        except KafkaError as exc:
            if patches.failed_for_good(producer):
                self._swap_producer(producer, exc)
            elif not isinstance(exc, _RECORD_ERRORS):
                self._replace_producer(exc)
            raise log_error(exc, what, self.bootstrap, _kind(exc, futures)) from exc

    def _swap_producer(self, failed: KafkaProducer, reason: KafkaError) -> None:
        """Start over at once with a new producer when the old one refuses every record
        from now on although the broker answers (it refused one record as too large):
        the next append must not fail for it. Built on the caller's thread, since a
        broker has just answered; when that fails, replaced as after an outage."""
        try:
            fresh = self._new_producer()
        except Exception:  # the broker went away meanwhile
            self._replace_producer(reason)
            return
        with self._producer_lock:
            swapped = self._producer is failed
            if swapped:
                self._producer = fresh
        if swapped:  # else another caller did, a moment ago
            log.warning(
                "replaced the Kafka producer: it refused every record after the broker "
                "refused one (%s)",
                reason,
            )
        threading.Thread(
            target=_close_quietly,
            args=(failed if swapped else fresh,),
            name="producer-close",
            daemon=True,
        ).start()

    def end_offset(self, topic: str, partition: int) -> int:
        ends = self.end_offsets([(topic, partition)])
        if (topic, partition) not in ends:
            raise LogError(f"no partition {partition} of topic {topic} in Kafka")
        return ends[(topic, partition)]

    def end_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._admin.end_offsets(partitions)

    def start_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._admin.start_offsets(partitions)

    def reader(self, positions: Sequence[Position]) -> KafkaReader:
        return KafkaReader(self._settings, positions)

    def group_reader(
        self,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        session_timeout_ms: int = 6000,
        advertised: str = "",
    ) -> KafkaGroupReader:
        return self._groups.group_reader(
            group, topics, member_id, on_revoked, on_assigned, session_timeout_ms, advertised
        )

    def subscriber(self, group: str, pattern: str, from_beginning: bool) -> KafkaSubscriber:
        return KafkaSubscriber(self._settings, group, pattern, from_beginning)

    def group_members(self, group: str) -> list[GroupMember]:
        return self._admin.group_members(group)

    def remove_member(self, group: str, member: GroupMember) -> bool:
        return self._admin.remove_member(group, member)

    def close(self) -> None:
        self._closed.set()
        try:
            with translated("cannot close the Kafka producer", self.bootstrap):
                # Bounded: records Kafka cannot take (it is down) must not hold up a
                # shutdown (SIGTERM once took over 20 s).
                self._producer.close(timeout=_CLOSE_TIMEOUT_S)
        finally:
            self._admin.close()


def _kind(exc: KafkaError, futures: Sequence[FutureRecordMetadata]) -> type[LogError]:
    """What a failed append's error may say: that nothing was written when every record
    queued was refused by the broker (the one that failed is one of them, or was never
    queued: send() raised), else that some records may be in the log."""
    for future in futures:
        if not (future.is_done and future.failed() and isinstance(future.exception, _REFUSED)):
            return LogError
    if isinstance(exc, MessageSizeTooLargeError | RecordListTooLargeError):
        return RecordTooLargeError
    return NotAppendedError
