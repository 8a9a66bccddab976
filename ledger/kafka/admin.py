"""Topics, offsets, the cluster's state and the description of groups, through
kafka-python's admin client. `KafkaLog` asks it everything but appends and reads; the
librdkafka adapter asks it the same (docs/decisions/0021-librdkafka-adapter.md):
librdkafka's admin client waited for a dead broker as its "controller" while two
brokers of three answered, and kafka-python's asks any broker that answers."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, OffsetSpec
from kafka.errors import (
    InvalidPartitionsError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from pinledger.ledger.kafka import patches
from pinledger.ledger.kafka.errors import log_error, translated
from pinledger.ledger.kafka.membership import describe_group, remove_member
from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import (
    BROKER_MAX_MESSAGE_BYTES,
    GroupMember,
    LogError,
    PartitionKey,
    TopicState,
)

# How long delete_topic waits for the topic to be gone.
_TOPIC_WAIT_S = 30.0


class _NoConfiguration(logging.Filter):
    """kafka-python's admin client logs its whole configuration at DEBUG, the SASL
    password in it (`pinledger -v` shows DEBUG): that one line is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Starting KafkaAdminClient with configuration")


logging.getLogger("kafka.admin.client").addFilter(_NoConfiguration())


class KafkaAdmin:
    """One kafka-python admin client. Constructing it checks the kafka-python version
    (describe_group relies on patches) and fails with a LogError when Kafka cannot be
    reached."""

    def __init__(self, settings: KafkaSettings) -> None:
        patches.check_kafka_python()
        self._settings = settings
        self.bootstrap = settings.bootstrap
        with translated(
            f"cannot reach Kafka at {settings.bootstrap}",
            settings.bootstrap,
            explained=settings.security,
        ):
            self._admin = KafkaAdminClient(
                **settings.connection(),
                client_id=f"{settings.client_id}-admin",
                bootstrap_timeout_ms=settings.bootstrap_timeout_ms,
            )

    def _translated(self, what: str) -> AbstractContextManager[None]:
        return translated(what, self.bootstrap, explained=self._settings.security)

    def create_topic(self, topic: str, partitions: int, keep_forever: bool = False) -> bool:
        try:
            policy = self._settings.topics
            self._admin.create_topics(
                {
                    topic: {
                        "num_partitions": partitions,
                        # -1: the broker's default.replication.factor.
                        "replication_factor": policy.replication_factor or -1,
                        "configs": policy.topic_configs(keep_forever),
                    }
                },
                wait_for_metadata=True,
            )
        except TopicAlreadyExistsError:
            return False
        except KafkaError as exc:
            raise log_error(exc, f"cannot create topic {topic}", self.bootstrap) from exc
        return True

    def add_partitions(self, topic: str, total: int) -> bool:
        current = self.partition_count(topic)
        if current is None:
            raise LogError(f"cannot add partitions to topic {topic}: there is no such topic")
        if current >= total:
            return False
        try:
            self._admin.create_partitions({topic: NewPartitions(total_count=total)})
        except InvalidPartitionsError:
            # Another server added them a moment ago (or more): nothing left to do.
            if (self.partition_count(topic) or 0) >= total:
                return False
            raise
        except KafkaError as exc:
            raise log_error(
                exc, f"cannot add partitions to topic {topic} (to {total})", self.bootstrap
            ) from exc
        # The controller answers before every broker's metadata lists the new
        # partitions; an append to one before then would fail.
        deadline = time.monotonic() + _TOPIC_WAIT_S
        while (self.partition_count(topic) or 0) < total:
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic} does not list its {total} partitions after 30 s")
            time.sleep(0.05)
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
        deadline = time.monotonic() + _TOPIC_WAIT_S
        while self.existing([topic]):
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic} is still being deleted after 30 s")
            time.sleep(0.05)

    def partition_count(self, topic: str) -> int | None:
        info = self.describe([topic]).get(topic)
        return None if info is None else len(info.get("partitions") or [])

    def topics(self) -> set[str]:
        """Every topic in the cluster (for tools and tests: the service asks about its
        own topics only, see `existing`)."""
        with self._translated("cannot list the topics"):
            return set(self._admin.list_topics())

    def existing(self, topics: Iterable[str]) -> set[str]:
        """Which of these topics exist: a question about them only, whatever the size of
        the cluster."""
        return set(self.describe(topics))

    def broker_count(self) -> int:
        with self._translated("cannot describe the Kafka cluster"):
            cluster: dict[str, Any] = self._admin.describe_cluster()
        return len(cluster.get("brokers") or [])

    def topic_states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        described = self.describe(topics)
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

    def describe(self, topics: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Kafka's description of each of these topics that exists, by name."""
        wanted = sorted(set(topics))
        if not wanted:
            return {}
        with self._translated(f"cannot describe topics in Kafka at {self.bootstrap}"):
            described: list[dict[str, Any]] = self._admin.describe_topics(wanted)
        return {str(i["name"]): i for i in described if i.get("error_code", 0) == 0}

    def end_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list_offsets(partitions, OffsetSpec.LATEST, "cannot read end offsets")

    def start_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list_offsets(partitions, OffsetSpec.EARLIEST, "cannot read start offsets")

    def _list_offsets(
        self, partitions: Sequence[PartitionKey], spec: OffsetSpec, what: str
    ) -> dict[PartitionKey, int]:
        existing = self.existing(t for t, _ in partitions)
        wanted = [TopicPartition(t, p) for t, p in partitions if t in existing]
        if not wanted:
            return {}
        # The admin client's ListOffsets refreshes metadata for topics it has not seen
        # yet; a plain consumer's end_offsets drops such partitions from its answer.
        with self._translated(what):
            offsets = self._admin.list_partition_offsets({tp: spec for tp in wanted})
        return {(tp.topic, tp.partition): found.offset for tp, found in offsets.items()}

    def group_members(self, group: str) -> list[GroupMember]:
        """Live members of a consumer group with the partitions each owns."""
        return describe_group(self._admin, group, self.bootstrap)

    def remove_member(self, group: str, member: GroupMember) -> bool:
        return remove_member(self._admin, group, member, self.bootstrap)

    def close(self) -> None:
        with self._translated("cannot close the Kafka admin client"):
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
        max_message_bytes=int(setting("max.message.bytes", str(BROKER_MAX_MESSAGE_BYTES))),
    )
