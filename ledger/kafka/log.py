"""The Kafka adapter of the log port (`ledger.log.Log`): the admin client and the
producer. One producer per process (it is thread-safe and batches concurrent appends
into the same produce requests); readers and group members are their own consumers
(reader.py, group.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
from kafka.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

from pinledger.ledger.kafka import patches
from pinledger.ledger.kafka.errors import log_error, translated
from pinledger.ledger.kafka.group import KafkaGroupReader, KafkaSubscriber
from pinledger.ledger.kafka.membership import describe_group
from pinledger.ledger.kafka.reader import KafkaReader
from pinledger.ledger.kafka.settings import MAX_RECORD_BYTES, KafkaSettings
from pinledger.ledger.log import (
    Append,
    GroupMember,
    LogError,
    PartitionKey,
    PartitionsCallback,
    Position,
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
        patches.check_kafka_python()
        self._settings = settings
        self._producer_lock = threading.Lock()
        self._replacing = False
        self._closed = threading.Event()
        with translated(f"cannot reach Kafka at {settings.bootstrap}", settings.bootstrap):
            self._producer = self._new_producer()
            self._admin = KafkaAdminClient(
                **settings.connection(), client_id=f"{settings.client_id}-admin"
            )

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

    def _translated(self, what: str) -> AbstractContextManager[None]:
        return translated(what, self.bootstrap)

    def create_topic(self, topic: str, partitions: int) -> bool:
        try:
            policy = self._settings.topics
            self._admin.create_topics(
                {
                    topic: {
                        "num_partitions": partitions,
                        # -1: the broker's default.replication.factor.
                        "replication_factor": policy.replication_factor or -1,
                        "configs": policy.topic_configs(),
                    }
                },
                wait_for_metadata=True,
            )
        except TopicAlreadyExistsError:
            return False
        except KafkaError as exc:
            raise log_error(exc, f"cannot create topic {topic}", self.bootstrap) from exc
        return True

    def delete_topic(self, topic: str) -> None:
        try:
            self._admin.delete_topics([topic])
        except UnknownTopicOrPartitionError:
            return
        except KafkaError as exc:
            raise log_error(exc, f"cannot delete topic {topic}", self.bootstrap) from exc
        # Deletion is asynchronous in Kafka; wait so that a queue created again under
        # the same name gets a fresh topic, not the one being deleted.
        deadline = time.monotonic() + 30
        while self.existing([topic]):
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic} is still being deleted after 30 s")
            time.sleep(0.05)
        self.forget_deleted_topics()

    def partition_count(self, topic: str) -> int | None:
        info = self._describe([topic]).get(topic)
        return None if info is None else len(info.get("partitions") or [])

    def topics(self) -> set[str]:
        """Every topic in the cluster (for tools and tests: the service asks about its
        own topics only, see `existing`)."""
        with self._translated("cannot list the topics"):
            return set(self._admin.list_topics())

    def existing(self, topics: Iterable[str]) -> set[str]:
        """Which of these topics exist: a question about them only, whatever the size of
        the cluster."""
        return set(self._describe(topics))

    def broker_count(self) -> int:
        with self._translated("cannot describe the Kafka cluster"):
            cluster: dict[str, Any] = self._admin.describe_cluster()
        return len(cluster.get("brokers") or [])

    def topic_states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        described = self._describe(topics)
        if not described:
            return {}
        resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in described]
        with self._translated("cannot read topic settings"):
            answer: dict[str, Any] = self._admin.describe_configs(resources, config_filter="all")
        configs: dict[str, dict[str, Any]] = answer.get("topic", {})
        return {
            name: _topic_state(name, info, configs.get(name, {}))
            for name, info in described.items()
        }

    def _describe(self, topics: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Kafka's description of each of these topics that exists, by name."""
        wanted = sorted(set(topics))
        if not wanted:
            return {}
        with self._translated(f"cannot describe topics in Kafka at {self.bootstrap}"):
            described: list[dict[str, Any]] = self._admin.describe_topics(wanted)
        return {str(i["name"]): i for i in described if i.get("error_code", 0) == 0}

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
        if replacing:
            # The producer could not deliver and no broker has answered since: fail at
            # once rather than make every caller wait out the delivery timeout again.
            raise log_error(
                KafkaTimeoutError("no broker has answered since the last failed delivery"),
                f"append to Kafka at {self.bootstrap} failed (reconnecting)",
                self.bootstrap,
            )
        deadline = time.monotonic() + self._settings.append_timeout_ms / 1000
        try:
            futures = [
                producer.send(a.topic, value=a.value, partition=a.partition, headers=a.headers)
                for a in appends
            ]
            return [f.get(timeout=max(0.001, deadline - time.monotonic())).offset for f in futures]
        except KafkaError as exc:
            if not isinstance(exc, _RECORD_ERRORS):
                self._replace_producer(exc)
            raise log_error(
                exc, f"append to Kafka at {self.bootstrap} failed", self.bootstrap
            ) from exc

    def end_offset(self, topic: str, partition: int) -> int:
        ends = self.end_offsets([(topic, partition)])
        if (topic, partition) not in ends:
            raise LogError(f"no partition {partition} of topic {topic} in Kafka")
        return ends[(topic, partition)]

    def end_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        existing = self.existing(t for t, _ in partitions)
        wanted = [TopicPartition(t, p) for t, p in partitions if t in existing]
        if not wanted:
            return {}
        # The admin client's ListOffsets refreshes metadata for topics it has not seen
        # yet; a plain consumer's end_offsets drops such partitions from its answer.
        with self._translated("cannot read end offsets"):
            offsets = self._admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in wanted})
        return {(tp.topic, tp.partition): found.offset for tp, found in offsets.items()}

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
    ) -> KafkaGroupReader:
        return KafkaGroupReader(
            self._settings, group, topics, member_id, on_revoked, on_assigned, session_timeout_ms
        )

    def subscriber(self, group: str, pattern: str, from_beginning: bool) -> KafkaSubscriber:
        return KafkaSubscriber(self._settings, group, pattern, from_beginning)

    def group_members(self, group: str) -> list[GroupMember]:
        """Live members of a consumer group with the partitions each owns."""
        return describe_group(self._admin, group, self.bootstrap)

    def close(self) -> None:
        self._closed.set()
        with self._translated("cannot close the Kafka clients"):
            # Bounded: records Kafka cannot take (it is down) must not hold up a
            # shutdown (SIGTERM once took over 20 s).
            self._producer.close(timeout=_CLOSE_TIMEOUT_S)
            self._admin.close()


def _topic_state(name: str, info: dict[str, Any], configs: dict[str, Any]) -> TopicState:
    partitions = info.get("partitions") or []

    def setting(key: str, default: str) -> str:
        entry = configs.get(key)
        return str(entry["value"]) if entry and entry.get("value") is not None else default

    return TopicState(
        name=name,
        partitions=len(partitions),
        replicas=min((len(p.get("replica_nodes") or []) for p in partitions), default=0),
        under_replicated=sum(
            len(p.get("isr_nodes") or []) < len(p.get("replica_nodes") or []) for p in partitions
        ),
        offline=sum(p.get("leader_id", -1) < 0 for p in partitions),
        min_insync_replicas=int(setting("min.insync.replicas", "1")),
        retention_ms=int(setting("retention.ms", "604800000")),
        retention_bytes=int(setting("retention.bytes", "-1")),
        cleanup_policy=setting("cleanup.policy", "delete"),
        unclean_leader_election=setting("unclean.leader.election.enable", "false") == "true",
    )
