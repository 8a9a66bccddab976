"""The group consumers: the owners' group member (partition ownership) and the
subscriber of ledger.kafka.subscription (other systems reading the ledger)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyAssignorUserData,
    StickyPartitionAssignor,
)
from kafka.structs import OffsetAndMetadata

from pinledger.ledger.kafka import patches
from pinledger.ledger.kafka.errors import translated
from pinledger.ledger.kafka.reader import (
    MAX_PARTITION_FETCH_BYTES,
    to_records,
)
from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import LogError, LogRecord, PartitionKey, PartitionsCallback

# The owners fetch less per request than a reader: what one poll returns is decoded and
# folded as one batch, so the fetch sizes bound an owner's memory while it catches up
# on a burst of enqueues. With a reader's 8 / 32 MiB, a server that took 2,000,000
# enqueues of 512 B peaked at 333 MiB RSS while its projection ran behind (bench
# --scale; docs/performance.md).
OWNER_PARTITION_FETCH_BYTES = 2 * 1024 * 1024
OWNER_FETCH_MAX_BYTES = 8 * 1024 * 1024
# A partition added to a queue is handed out within this (plus a rebalance).
GROUP_METADATA_MAX_AGE_MS = 5000
# How often a member heartbeats, whatever its session timeout: a member learns of a
# rebalance (a server that left or was removed) at its next heartbeat, so this bounds
# how long the others wait for it (decision 0039). Four small requests a second.
HEARTBEAT_INTERVAL_MS = 250


# Where a member's advertisement starts in its subscription's user data. Topic names
# cannot hold a NUL, so the marker cannot occur in the sticky assignor's own data.
_ADVERTISED = b"\x00pinledger-advertised\x00"


class AdvertisingStickyAssignor(StickyPartitionAssignor):  # type: ignore[misc]
    """kafka-python's sticky assignor, whose member metadata also carries a short text
    the member advertises (Log.group_reader's `advertised`: the ledger formats a server
    reads), after the sticky assignor's own user data. Its protocol name stays
    "sticky", and the sticky assignor of any member (of this release or an older one)
    decodes its user data and ignores the bytes after it, so members with and without
    advertisements share one group during a rolling upgrade (decision 0025)."""

    def __init__(self, advertised: str) -> None:
        super().__init__()
        self._advertised = advertised.encode("ascii")

    def metadata(self, topics: Any) -> Any:
        subscription = super().metadata(topics)
        user_data = subscription.user_data
        if not user_data:
            # What the sticky assignor sends before its first assignment (b""), spelt
            # out: an empty user data followed by the advertisement would not decode.
            user_data = StickyAssignorUserData([], self.DEFAULT_GENERATION_ID)
        if not isinstance(user_data, bytes):
            user_data = user_data.encode()
        subscription.user_data = user_data + _ADVERTISED + self._advertised
        return subscription


def advertised_by(metadata: Any) -> str:
    """The advertisement in a member's metadata as kafka-python's describe_groups gives
    it (its user data as bytes, or as text), or "" for a member that advertised none."""
    user_data = metadata.get("user_data") if isinstance(metadata, dict) else None
    if isinstance(user_data, str):
        user_data = user_data.encode("latin-1", errors="replace")
    if not isinstance(user_data, bytes):
        return ""
    _, marker, advertised = user_data.rpartition(_ADVERTISED)
    return advertised.decode("ascii", errors="replace") if marker else ""


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Runs on the consumer's I/O loop, which also heartbeats: hand over and return."""

    def __init__(
        self, revoked: PartitionsCallback, assigned: PartitionsCallback, woken: threading.Event
    ):
        self._revoked = revoked
        self._assigned = assigned
        self._woken = woken

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._revoked([(tp.topic, tp.partition) for tp in revoked])

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._assigned([(tp.topic, tp.partition) for tp in assigned])
        self._woken.set()  # the poll under way ends: the owner adopts them now


class KafkaGroupReader:
    """Implements ledger.log.GroupReader. A member of a consumer group over an explicit
    list of topics: Kafka assigns each partition to exactly one live member (partition
    ownership). Offsets are never committed to Kafka; the owner seeks to the offset its
    projection stored.

    The list is explicit, not a pattern (decision 0008): a pattern subscription makes
    kafka-python fetch the metadata of every topic in the cluster at each refresh, on
    the thread that also heartbeats."""

    def __init__(
        self,
        settings: KafkaSettings,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        session_timeout_ms: int,
        advertised: str = "",
    ) -> None:
        self._bootstrap = settings.bootstrap
        self._group = group
        with translated(f"cannot join consumer group {group}", self._bootstrap):
            self._consumer = KafkaConsumer(
                **settings.connection(),
                client_id=member_id,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=min(HEARTBEAT_INTERVAL_MS, session_timeout_ms // 3),
                # The group's leader sees partitions added to a queue (decision 0030)
                # only at a metadata refresh, 5 min apart by default. The subscription
                # is a list, so a refresh asks about these topics only (decision 0008).
                metadata_max_age_ms=GROUP_METADATA_MAX_AGE_MS,
                partition_assignment_strategy=[AdvertisingStickyAssignor(advertised)],
                max_partition_fetch_bytes=OWNER_PARTITION_FETCH_BYTES,
                fetch_max_bytes=OWNER_FETCH_MAX_BYTES,
                allow_auto_create_topics=False,
            )
        patches.track_confirmations(self._consumer)
        self._woken = threading.Event()
        self._listener = _Listener(on_revoked, on_assigned, self._woken)
        self.subscribe(topics)

    def subscribe(self, topics: Iterable[str]) -> None:
        """Replace the subscription (a rejoin follows when it changed). Call it from the
        polling thread."""
        wanted = sorted(set(topics))
        with translated(f"cannot subscribe to topics in group {self._group}", self._bootstrap):
            if wanted:
                self._consumer.subscribe(topics=wanted, listener=self._listener)
            else:
                self._consumer.unsubscribe()  # kafka-python refuses an empty list

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        with translated(f"cannot poll as a member of group {self._group}", self._bootstrap):
            self._woken.clear()
            return to_records(
                patches.poll_group(self._consumer, max_records, timeout_ms, self._woken.is_set)
            )

    def wake(self) -> None:
        self._woken.set()

    def seek(self, topic: str, partition: int, offset: int) -> None:
        try:
            with translated(f"cannot seek {topic}[{partition}]", self._bootstrap):
                self._consumer.seek(TopicPartition(topic, partition), offset)
        except ValueError as exc:  # kafka-python's answer for an unassigned partition
            raise LogError(
                f"cannot seek {topic}[{partition}] to offset {offset}: {exc}. Seek only "
                "partitions assigned to this member, at offsets >= 0."
            ) from exc

    def assignment(self) -> list[PartitionKey]:
        return [(tp.topic, tp.partition) for tp in self._consumer.assignment()]

    def confirmed_at(self) -> float | None:
        return patches.confirmed_at(self._consumer)

    def request_rejoin(self) -> None:
        """Make the next poll rejoin the group, so the leader assigns again. kafka-python
        can leave a topic created during a rebalance out of the assignment and never
        notice (dpkp/kafka-python#1237): its subscription already lists the topic, so
        nothing looks changed. Any thread may call it (it sets a flag)."""
        patches.request_rejoin(self._consumer)

    def close(self) -> None:
        with translated(f"cannot leave group {self._group}", self._bootstrap):
            self._consumer.close()


class KafkaSubscriber:
    """A consumer of its own group over every topic matching a pattern, committing its
    offsets to Kafka (for ledger.kafka.subscription: other systems reading the ledger)."""

    def __init__(
        self, settings: KafkaSettings, group: str, pattern: str, from_beginning: bool
    ) -> None:
        patches.check_kafka_python()
        self._bootstrap = settings.bootstrap
        self._group = group
        with translated(f"cannot join consumer group {group}", self._bootstrap):
            self._consumer = KafkaConsumer(
                **settings.connection(),
                client_id=f"{settings.client_id}-{group}",
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest" if from_beginning else "latest",
                metadata_max_age_ms=1000,  # new queues are picked up within a second
                max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
                allow_auto_create_topics=False,
            )
            self._consumer.subscribe(pattern=pattern)

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        with translated(f"cannot poll as a member of group {self._group}", self._bootstrap):
            return to_records(patches.poll_group(self._consumer, max_records, timeout_ms))

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> None:
        """Commit, per partition, the offset of the next record to read."""
        if not next_offsets:
            return
        with translated(f"cannot commit offsets of group {self._group}", self._bootstrap):
            self._consumer.commit(
                {
                    TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
                    for (topic, partition), offset in next_offsets.items()
                }
            )

    def close(self) -> None:
        with translated(f"cannot leave group {self._group}", self._bootstrap):
            self._consumer.close()
