"""Topics, offsets and the cluster's state, through librdkafka's admin client.

Every call waits on the futures the admin client returns, for at most the settings'
request timeout (and a second for the answer to come back); a topic that does not
exist is an answer (left out, or False), never an error."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
    TopicDescription,
)

from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import LogError, PartitionKey, TopicState
from pinledger.ledger.rdkafka import config
from pinledger.ledger.rdkafka.errors import (
    UNKNOWN_TOPIC,
    error_of,
    log_error,
    timed_out,
    translated,
)

T = TypeVar("T")

# How long create_topic waits for the new topic's partitions to have leaders (as
# kafka-python's wait_for_metadata), and delete_topic for the topic to be gone.
_TOPIC_WAIT_S = 30.0
_EXISTS = frozenset({KafkaError.TOPIC_ALREADY_EXISTS})
_LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.REPLICA_NOT_AVAILABLE,
    }
)


class RdkafkaAdmin:
    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self.bootstrap = settings.bootstrap
        self._timeout_s = settings.request_timeout_ms / 1000
        try:
            self._admin = AdminClient(config.admin(settings))
        except KafkaException as exc:
            raise log_error(
                error_of(exc), "cannot make a Kafka admin client", self.bootstrap
            ) from exc

    def _result(self, future: Future[T], what: str) -> T:
        """The future's answer; a LogError for librdkafka's error or no answer."""
        with translated(what, self.bootstrap, self._timeout_s):
            return future.result(timeout=self._timeout_s + 1)

    def _settled(self, future: Future[Any], what: str, absent: frozenset[int]) -> bool:
        """Whether the future's operation was done: False when librdkafka answers with
        an error in `absent` (the topic exists already, or does not); a LogError for
        any other error or no answer."""
        try:
            future.result(timeout=self._timeout_s + 1)
        except KafkaException as exc:
            if error_of(exc).code() in absent:
                return False
            raise log_error(error_of(exc), what, self.bootstrap) from exc
        except TimeoutError as exc:
            raise timed_out(what, self.bootstrap, self._timeout_s) from exc
        return True

    def _options(self) -> dict[str, Any]:
        return {"request_timeout": self._timeout_s}

    def create_topic(self, topic: str, partitions: int) -> bool:
        what = f"cannot create topic {topic}"
        policy = self._settings.topics
        new = NewTopic(
            topic,
            num_partitions=partitions,
            # -1: the broker's default.replication.factor.
            replication_factor=policy.replication_factor or -1,
            config=policy.topic_configs(),
        )
        with translated(what, self.bootstrap, self._timeout_s):
            futures = self._admin.create_topics(
                [new], operation_timeout=self._timeout_s, **self._options()
            )
        if not self._settled(futures[topic], what, _EXISTS):
            return False
        # Created on the controller; wait until every partition has a leader, so that
        # an append or a reader that follows finds it.
        deadline = time.monotonic() + _TOPIC_WAIT_S
        while True:
            described = self.describe([topic]).get(topic)
            if described is not None and all(p.leader is not None for p in described.partitions):
                return True
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic} has no leader for every partition after 30 s")
            time.sleep(0.05)

    def delete_topic(self, topic: str) -> None:
        what = f"cannot delete topic {topic}"
        with translated(what, self.bootstrap, self._timeout_s):
            futures = self._admin.delete_topics(
                [topic], operation_timeout=self._timeout_s, **self._options()
            )
        if not self._settled(futures[topic], what, UNKNOWN_TOPIC):
            return
        # Deletion is asynchronous in Kafka; wait so that a queue created again under
        # the same name gets a fresh topic, not the one being deleted.
        deadline = time.monotonic() + _TOPIC_WAIT_S
        while self.describe([topic]):
            if time.monotonic() > deadline:
                raise LogError(f"topic {topic} is still being deleted after 30 s")
            time.sleep(0.05)

    def describe(self, topics: Iterable[str]) -> dict[str, TopicDescription]:
        """Kafka's description of each of these topics that exists, by name."""
        wanted = sorted(set(topics))
        if not wanted:
            return {}
        what = f"cannot describe topics in Kafka at {self.bootstrap}"
        with translated(what, self.bootstrap, self._timeout_s):
            futures = self._admin.describe_topics(TopicCollection(wanted), **self._options())
        return {
            name: self._result(future, what)
            for name, future in futures.items()
            if self._settled(future, what, UNKNOWN_TOPIC)
        }

    def topics(self) -> set[str]:
        with translated("cannot list the topics", self.bootstrap, self._timeout_s):
            return set(self._admin.list_topics(timeout=self._timeout_s).topics)

    def broker_count(self) -> int:
        future = self._admin.describe_cluster(**self._options())
        return len(self._result(future, "cannot describe the Kafka cluster").nodes)

    def topic_states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        described = self.describe(topics)
        if not described:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in described]
        what = "cannot read topic settings"
        with translated(what, self.bootstrap, self._timeout_s):
            futures = self._admin.describe_configs(resources, **self._options())
        configs = {
            resource.name: {key: entry.value for key, entry in self._result(future, what).items()}
            for resource, future in futures.items()
        }
        return {
            name: _topic_state(name, info, configs.get(name, {}))
            for name, info in described.items()
        }

    def end_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        """End offsets of the partitions of existing topics; a partition an existing
        topic does not have is a LogError."""
        existing = self.describe(t for t, _ in partitions)
        # confluent-kafka leaves OffsetSpec's constructors unannotated.
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        wanted = {TopicPartition(t, p): latest for t, p in partitions if t in existing}
        if not wanted:
            return {}
        what = "cannot read end offsets"
        ends: dict[PartitionKey, int] = {}
        deadline = time.monotonic() + self._timeout_s
        while wanted:
            with translated(what, self.bootstrap, self._timeout_s):
                futures = self._admin.list_offsets(wanted, **self._options())
            again = {}
            for tp, future in futures.items():
                where = f"{what} of {tp.topic}[{tp.partition}]"
                try:
                    ends[(tp.topic, tp.partition)] = future.result(self._timeout_s + 1).offset
                except KafkaException as exc:
                    error = error_of(exc)
                    if error.code() in UNKNOWN_TOPIC:
                        continue  # deleted since it was described: as one that never was
                    if _moving(error) and time.monotonic() < deadline:
                        again[tp] = latest
                        continue
                    raise log_error(error, where, self.bootstrap) from exc
                except TimeoutError as exc:
                    raise timed_out(where, self.bootstrap, self._timeout_s) from exc
            if again:
                time.sleep(0.05)
            wanted = again
        return ends


def _moving(error: KafkaError) -> bool:
    """A partition whose leadership the broker asked is still learning (a topic created
    a moment ago under the name of one just deleted: measured NOT_LEADER_FOR_PARTITION
    on the single-node stack): asked again until the request timeout."""
    return error.retriable() or error.code() in _LEADER_MOVING


def _topic_state(name: str, info: TopicDescription, configs: dict[str, str | None]) -> TopicState:
    partitions = info.partitions

    def setting(key: str, default: str) -> str:
        value = configs.get(key)
        return default if value is None else str(value)

    return TopicState(
        name=name,
        partitions=len(partitions),
        replicas=min((len(p.replicas) for p in partitions), default=0),
        under_replicated=sum(len(p.isr) < len(p.replicas) for p in partitions),
        offline=sum(p.leader is None or p.leader.id < 0 for p in partitions),
        min_insync_replicas=int(setting("min.insync.replicas", "1")),
        retention_ms=int(setting("retention.ms", "604800000")),
        retention_bytes=int(setting("retention.bytes", "-1")),
        cleanup_policy=setting("cleanup.policy", "delete"),
        unclean_leader_election=setting("unclean.leader.election.enable", "false") == "true",
    )
