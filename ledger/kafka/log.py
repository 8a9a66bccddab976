"""The Kafka adapter of the log port (`ledger.log.Log`), on kafka-python 3.

The only module that imports kafka-python. One producer per process (it is
thread-safe and batches concurrent appends into the same produce requests); readers
are plain assigned consumers with no group, reading from explicit offsets kept in
Postgres next to the rows they produced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata

from pinledger.ledger.log import Append, GroupMember, LogError, LogRecord, Position

log = logging.getLogger(__name__)

# Enough for the largest job body (commands.Limits) plus the envelope around it.
MAX_RECORD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap: str = "127.0.0.1:19092"
    # No linger: every call waits for its own append (a dequeue with piggybacked acks
    # waits for two), and 2 ms of linger doubled dequeue latency (p50 ~11 -> ~6 ms at
    # 0) with no throughput gain measured; concurrent calls still share a produce
    # request while one is in flight (bench/, docs/performance.md).
    linger_ms: int = 0
    batch_size: int = 256 * 1024
    request_timeout_ms: int = 15_000
    client_id: str = "pinledger"


# How long a poll may take while its consumer (re)joins its group: long enough for the
# join to finish inside the poll (see _poll_group).
_JOIN_BUDGET_MS = 5000


def _poll_group(consumer: KafkaConsumer, max_records: int, timeout_ms: int) -> list[LogRecord]:
    """Poll a consumer of a group without losing a rejoin to kafka-python 3.0.12's
    join race. When a rejoin is caused by a metadata change (a topic created that
    matches the subscription pattern: every createQueue) and the poll's time runs out
    before SyncGroup answers, the join finishes in the background and nothing ever
    completes it: the assignment is never applied, heartbeats stay disabled, and Kafka
    evicts the member after its session timeout (reproduced with 5 ms polls; with the
    owners' 200 ms polls it happened under load in CI, leaving queues unserved).
    So a rejoin gets the time to finish before records are polled (the coordinator's
    own poll, which KafkaConsumer.poll runs first on the same thread), and a join that
    finished uncollected is started again. `_coordinator` is kafka-python's own."""
    coordinator = consumer._coordinator
    join = coordinator._join_task
    if coordinator.need_rejoin() or (join is not None and not join.is_done):
        coordinator.poll(timeout_ms=_JOIN_BUDGET_MS)
    records = _records(consumer.poll(timeout_ms=timeout_ms, max_records=max_records))
    join = coordinator._join_task
    if join is not None and join.is_done and not coordinator.need_rejoin():
        log.info(
            "group %s: a rejoin finished while nobody waited for it; joining again",
            coordinator.group_id,
        )
        coordinator.request_rejoin()
    return records


def _records(batches: dict[Any, Any]) -> list[LogRecord]:
    records: list[LogRecord] = []
    for tp, messages in batches.items():
        records.extend(
            LogRecord(
                topic=tp.topic,
                partition=tp.partition,
                offset=m.offset,
                value=m.value,
                headers=list(m.headers or ()),
            )
            for m in messages
        )
    return records


class KafkaReader:
    def __init__(self, settings: KafkaSettings, positions: Sequence[Position]) -> None:
        self._consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap,
            client_id=f"{settings.client_id}-reader",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=32 * 1024 * 1024,
            allow_auto_create_topics=False,
        )
        partitions = [TopicPartition(p.topic, p.partition) for p in positions]
        self._consumer.assign(partitions)
        for position, partition in zip(positions, partitions, strict=True):
            self._consumer.seek(partition, position.offset)

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        return _records(self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records))

    def close(self) -> None:
        self._consumer.close()


Partitions = list[tuple[str, int]]


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Runs on the consumer's I/O loop, which also heartbeats: hand over and return."""

    def __init__(
        self, revoked: Callable[[Partitions], None], assigned: Callable[[Partitions], None]
    ):
        self._revoked = revoked
        self._assigned = assigned

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._revoked([(tp.topic, tp.partition) for tp in revoked])

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._assigned([(tp.topic, tp.partition) for tp in assigned])


class KafkaGroupReader:
    """A member of a consumer group over an explicit list of topics: Kafka assigns each
    partition to exactly one live member (partition ownership). Offsets are never
    committed to Kafka; the owner seeks to the offset its projection stored.

    The list is explicit, not a pattern (decision 0008): a pattern subscription makes
    kafka-python fetch the metadata of every topic in the cluster at each refresh, on
    the thread that also heartbeats."""

    def __init__(
        self,
        settings: KafkaSettings,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: Callable[[Partitions], None],
        on_assigned: Callable[[Partitions], None],
        session_timeout_ms: int,
    ) -> None:
        self._consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap,
            client_id=member_id,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(100, session_timeout_ms // 5),
            partition_assignment_strategy=[StickyPartitionAssignor],
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=32 * 1024 * 1024,
            allow_auto_create_topics=False,
        )
        self._listener = _Listener(on_revoked, on_assigned)
        self.subscribe(topics)

    def subscribe(self, topics: Iterable[str]) -> None:
        """Replace the subscription (a rejoin follows when it changed). Call it from the
        polling thread."""
        wanted = sorted(set(topics))
        if wanted:
            self._consumer.subscribe(topics=wanted, listener=self._listener)
        else:
            self._consumer.unsubscribe()  # kafka-python refuses an empty list

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        return _poll_group(self._consumer, max_records, timeout_ms)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._consumer.seek(TopicPartition(topic, partition), offset)

    def assignment(self) -> Partitions:
        return [(tp.topic, tp.partition) for tp in self._consumer.assignment()]

    def request_rejoin(self) -> None:
        """Make the next poll rejoin the group, so the leader assigns again. kafka-python
        can leave a topic created during a rebalance out of the assignment and never
        notice (dpkp/kafka-python#1237): its subscription already lists the topic, so
        nothing looks changed. There is no public call for this in kafka-python 3;
        `request_rejoin` is the coordinator's own (it only sets a flag). Call it from
        the polling thread."""
        self._consumer._coordinator.request_rejoin()

    def close(self) -> None:
        self._consumer.close()


class KafkaSubscriber:
    """A consumer of its own group over every topic matching a pattern, committing its
    offsets to Kafka (for ledger.subscription: other systems reading the ledger)."""

    def __init__(
        self, settings: KafkaSettings, group: str, pattern: str, from_beginning: bool
    ) -> None:
        try:
            self._consumer = KafkaConsumer(
                bootstrap_servers=settings.bootstrap,
                client_id=f"{settings.client_id}-{group}",
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest" if from_beginning else "latest",
                metadata_max_age_ms=1000,  # new queues are picked up within a second
                max_partition_fetch_bytes=8 * 1024 * 1024,
                allow_auto_create_topics=False,
            )
            self._consumer.subscribe(pattern=pattern)
        except KafkaError as exc:
            raise LogError(f"cannot join consumer group {group}: {exc}") from exc

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        return _poll_group(self._consumer, max_records, timeout_ms)

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> None:
        """Commit, per partition, the offset of the next record to read."""
        if next_offsets:
            self._consumer.commit(
                {
                    TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
                    for (topic, partition), offset in next_offsets.items()
                }
            )

    def close(self) -> None:
        self._consumer.close()


class KafkaLog:
    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=settings.bootstrap,
                client_id=settings.client_id,
                acks="all",
                enable_idempotence=True,
                linger_ms=settings.linger_ms,
                batch_size=settings.batch_size,
                max_request_size=MAX_RECORD_BYTES,
                request_timeout_ms=settings.request_timeout_ms,
                # An append to a topic that does not exist (a queue deleted through
                # another server a moment ago) fails after this, instead of 60 s.
                max_block_ms=10_000,
                # No longer than `append` waits for an answer (2 x request timeout):
                # kafka-python's I/O thread spins while it holds an undeliverable record.
                delivery_timeout_ms=settings.request_timeout_ms * 2,
                # A queue is a topic only createQueue makes: a send (or a metadata
                # request) for a deleted queue must not bring its topic back on a broker
                # with auto.create.topics.enable (Kafka's default).
                allow_auto_create_topics=False,
            )
            self._admin = KafkaAdminClient(
                bootstrap_servers=settings.bootstrap, client_id=f"{settings.client_id}-admin"
            )
        except KafkaError as exc:
            raise LogError(
                f"cannot reach Kafka at {settings.bootstrap}: {exc}. Start it with "
                "`make stack-up`, or point PINLEDGER_KAFKA at your broker."
            ) from exc

    @property
    def bootstrap(self) -> str:
        return self._settings.bootstrap

    def create_topic(self, topic: str, partitions: int) -> bool:
        try:
            self._admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": 1}},
                wait_for_metadata=True,
            )
        except TopicAlreadyExistsError:
            return False
        return True

    def delete_topic(self, topic: str) -> None:
        try:
            self._admin.delete_topics([topic])
        except UnknownTopicOrPartitionError:
            return
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
        return set(self._admin.list_topics())

    def existing(self, topics: Iterable[str]) -> set[str]:
        """Which of these topics exist: a question about them only, whatever the size of
        the cluster."""
        return set(self._describe(topics))

    def _describe(self, topics: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Kafka's description of each of these topics that exists, by name."""
        wanted = sorted(set(topics))
        if not wanted:
            return {}
        try:
            described: list[dict[str, Any]] = self._admin.describe_topics(wanted)
        except KafkaError as exc:
            raise LogError(f"cannot describe topics in Kafka at {self.bootstrap}: {exc}") from exc
        return {str(i["name"]): i for i in described if i.get("error_code", 0) == 0}

    def forget_deleted_topics(self) -> None:
        """Make the producer forget the topics it wrote to that no longer exist (see
        `_forget_deleted`); a server calls it every few seconds."""
        tracked = set(self._producer._metadata._topics)
        tracked |= {tp.topic for tp in list(self._producer._accumulator._batches)}
        if tracked:
            self._forget_deleted(self.existing(tracked))

    def _forget_deleted(self, existing: set[str]) -> None:
        """Make the producer forget topics the broker no longer has (deleted queues).
        kafka-python's producer never forgets a topic it once wrote to (Java's does,
        after metadata.max.idle.ms), and two things follow, neither reachable through
        a public call:

        - its metadata keeps asking for the topic every retry backoff (100 ms), logging
          an error each time, for as long as the process runs;
        - its accumulator keeps the topic's partitions, and a partition without a
          leader makes the I/O thread request metadata on every pass of its loop,
          waking itself up each time: once the producer writes again it spins a whole
          core (2.9 s of CPU in 3 s measured), starving the owner's group heartbeats
          until Kafka evicts it.

        Records still waiting for such a topic can never be delivered: they fail now,
        with the reason, instead of at the delivery timeout."""
        metadata = self._producer._metadata
        gone = metadata._topics - existing
        accumulator = self._producer._accumulator
        stale = [tp for tp in list(accumulator._batches) if tp.topic not in existing]
        if not gone and not stale:
            return
        with metadata._lock:
            # Replaced, not mutated: the I/O thread iterates it to build requests.
            metadata._topics = metadata._topics - gone
        error = UnknownTopicOrPartitionError("the topic was deleted (its queue was deleted)")
        for tp in stale:
            aborted = []
            with accumulator._tp_lock(tp):
                queued = accumulator._batches.get(tp)
                # Drained batches are in flight: the broker's answer completes them.
                while queued and queued[0].drained is None and not queued[0].is_done:
                    batch = queued.popleft()
                    batch.records.close()
                    aborted.append(batch)
                if not queued:
                    accumulator._batches.pop(tp, None)
            for batch in aborted:
                batch.abort(error)
                accumulator.deallocate(batch)
        log.debug("producer forgets deleted topics %s", sorted(gone | {tp.topic for tp in stale}))

    def append(self, appends: Sequence[Append]) -> list[int]:
        # No flush(): the producer sends when batches fill or linger passes, and
        # concurrent callers share those requests; waiting on our own futures suffices.
        timeout = self._settings.request_timeout_ms / 1000 * 2
        try:
            futures = [
                self._producer.send(
                    a.topic, value=a.value, partition=a.partition, headers=a.headers
                )
                for a in appends
            ]
            return [f.get(timeout=timeout).offset for f in futures]
        except KafkaError as exc:
            raise LogError(f"append to Kafka at {self._settings.bootstrap} failed: {exc}") from exc

    def end_offset(self, topic: str, partition: int) -> int:
        ends = self.end_offsets([(topic, partition)])
        if (topic, partition) not in ends:
            raise LogError(f"no partition {partition} of topic {topic} in Kafka")
        return ends[(topic, partition)]

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        existing = self.existing(t for t, _ in partitions)
        wanted = [TopicPartition(t, p) for t, p in partitions if t in existing]
        if not wanted:
            return {}
        # The admin client's ListOffsets refreshes metadata for topics it has not seen
        # yet; a plain consumer's end_offsets drops such partitions from its answer.
        offsets = self._admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in wanted})
        return {(tp.topic, tp.partition): found.offset for tp, found in offsets.items()}

    def reader(self, positions: Sequence[Position]) -> KafkaReader:
        return KafkaReader(self._settings, positions)

    def group_reader(
        self,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: Callable[[Partitions], None],
        on_assigned: Callable[[Partitions], None],
        session_timeout_ms: int = 6000,
    ) -> KafkaGroupReader:
        return KafkaGroupReader(
            self._settings, group, topics, member_id, on_revoked, on_assigned, session_timeout_ms
        )

    def subscriber(self, group: str, pattern: str, from_beginning: bool) -> KafkaSubscriber:
        return KafkaSubscriber(self._settings, group, pattern, from_beginning)

    def group_members(self, group: str) -> list[GroupMember]:
        """Live members of a consumer group with the partitions each owns."""
        try:
            described = self._admin.describe_groups([group])
        except KafkaError as exc:
            raise LogError(f"cannot describe consumer group {group}: {exc}") from exc
        info = described.get(group, {}) if isinstance(described, dict) else {}
        members = []
        for member in info.get("members") or []:
            assignment = member.get("member_assignment") or {}
            owned = [
                (topic, partition)
                for topic, partitions in _assigned_partitions(assignment)
                for partition in partitions
            ]
            members.append(
                GroupMember(member_id=str(member.get("client_id", "")), partitions=owned)
            )
        return members

    def close(self) -> None:
        self._producer.close()
        self._admin.close()


def _assigned_partitions(assignment: dict[str, Any]) -> list[tuple[str, list[int]]]:
    """The (topic, partitions) pairs of a decoded ConsumerAssignment, as kafka-python 3
    returns it: {"assigned_partitions": [{"topic": ..., "partitions": [...]}]}."""
    return [
        (str(pair["topic"]), [int(p) for p in pair["partitions"]])
        for pair in assignment.get("assigned_partitions") or []
    ]
