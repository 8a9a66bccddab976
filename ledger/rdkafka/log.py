"""The librdkafka adapter of the log port (`ledger.log.Log`): appends through one
librdkafka producer (producer.py), readers on librdkafka consumers (reader.py). The
owners' group membership is delegated to the kafka-python adapter
(`KafkaGroupMembership`): one protocol and one assignor for every member of the owners'
group, whichever adapter its server runs. So are topics, offsets and the cluster's
state (`KafkaAdmin`): librdkafka's admin client waited for a dead broker as its
"controller" while the other brokers answered, and reconnected to it without backoff
(docs/decisions/0021-librdkafka-adapter.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pinledger.ledger.kafka import (
    KafkaAdmin,
    KafkaGroupMembership,
    KafkaGroupReader,
    KafkaSettings,
)
from pinledger.ledger.log import (
    Append,
    GroupMember,
    LogError,
    PartitionKey,
    PartitionsCallback,
    Position,
    TopicState,
)
from pinledger.ledger.rdkafka.producer import Appender, AppendTimeoutError
from pinledger.ledger.rdkafka.reader import RdkafkaReader


class RdkafkaLog:
    """Implements ledger.log.Log and ledger.log.LogInspector."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._groups = KafkaGroupMembership(settings)
        # Before the producer: it is the one client here that fails at once when Kafka
        # cannot be reached (librdkafka's clients connect in the background).
        self._admin = KafkaAdmin(settings)
        try:
            self._appender = Appender(settings)
        except LogError:
            self._admin.close()
            raise

    @property
    def bootstrap(self) -> str:
        return self._settings.bootstrap

    def create_topic(self, topic: str, partitions: int, keep_forever: bool = False) -> bool:
        return self._admin.create_topic(topic, partitions, keep_forever)

    def delete_topic(self, topic: str) -> None:
        self._admin.delete_topic(topic)

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
        """Nothing to do: librdkafka learns from its metadata that a topic is gone,
        fails the records still queued for it, and does not keep asking about it
        (kafka-python did: decision 0007, and tests/integration/test_kafka_log.py checks
        both adapters)."""

    def append(self, appends: Sequence[Append]) -> list[int]:
        try:
            return self._appender.append(appends)
        except AppendTimeoutError as exc:
            # librdkafka holds records for a topic it does not know for up to
            # topic.metadata.propagation.max.ms (a topic created a moment ago may not
            # have reached every broker), so an append to a deleted queue's topic times
            # out as one to a broker that is down: say which it was.
            wanted = {a.topic for a in appends}
            try:
                gone = wanted - self.existing(wanted)
            except LogError:
                raise exc from None
            if not gone:
                raise
            raise LogError(
                f"append to Kafka at {self.bootstrap} failed: no topic {', '.join(sorted(gone))}."
                " The topic does not exist: its queue may have been deleted meanwhile."
            ) from exc

    def end_offset(self, topic: str, partition: int) -> int:
        ends = self.end_offsets([(topic, partition)])
        if (topic, partition) not in ends:
            raise LogError(f"no partition {partition} of topic {topic} in Kafka")
        return ends[(topic, partition)]

    def end_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._admin.end_offsets(partitions)

    def start_offsets(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._admin.start_offsets(partitions)

    def reader(self, positions: Sequence[Position]) -> RdkafkaReader:
        return RdkafkaReader(self._settings, positions)

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

    def group_members(self, group: str) -> list[GroupMember]:
        return self._admin.group_members(group)

    def remove_member(self, group: str, member: GroupMember) -> bool:
        return self._admin.remove_member(group, member)

    def close(self) -> None:
        try:
            self._appender.close()
        finally:
            self._admin.close()
