"""The log port: what pinledger needs from Kafka, and nothing more.

A queue is a topic (`queue_topic`) with its own number of partitions; a job lives in
one partition for life. Queue lifecycle events go to a one-partition catalog topic
(`catalog_topic`). `append` returns the offsets Kafka assigned once the broker has
acknowledged the records (acks=all, idempotent producer), so an answer to a client is
never given for a record that could still be lost.

Partition ownership goes through the log too: every server is a member of one group
(`Log.group_reader`), and the log assigns each partition of the topics the members
subscribe to to exactly one live member, moving partitions when members join, leave or
change their subscriptions (a rebalance). Members are told through two callbacks, and
read their partitions from offsets they choose (`GroupReader.seek`): nothing is
committed to the log, the projection keeps its offsets in Postgres.

This file is the contract: what each call promises is written here once.
tests/contract/test_log_contract.py runs the same suite against both Kafka adapters
(`pinledger.ledger.kafka.KafkaLog` on kafka-python, `pinledger.ledger.rdkafka.RdkafkaLog`
on librdkafka; `pinledger.ledger.adapters.open_log` chooses one by name) and the
in-memory fake (`pinledger.ledger.fake_log.FakeLog`). Every failure of the
log, whatever its cause, is a `LogError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pinledger.ledger.codec import Headers

DEFAULT_TOPIC_PREFIX = "pinledger."


def queue_topic(prefix: str, queue: str) -> str:
    return f"{prefix}q.{queue}"


def catalog_topic(prefix: str) -> str:
    return f"{prefix}catalog"


def owners_group(prefix: str) -> str:
    """The consumer group every server joins to own partitions."""
    return f"{prefix}owners"


def queue_of_topic(prefix: str, topic: str) -> str | None:
    head = f"{prefix}q."
    return topic[len(head) :] if topic.startswith(head) else None


class LogError(RuntimeError):
    """The log could not do what was asked; the message says what and what to check.

    From `Log.append` it leaves open whether the records are in the log: some or all
    of them may be (an acknowledgement lost, a timeout after which they still land, one
    record refused after others of the append were delivered). Only a
    `NotAppendedError` says that none is."""


class NotAppendedError(LogError):
    """An append that certainly wrote nothing: refused before anything was sent (a
    record over the size limit, a topic or partition the producer knows is missing, a
    closed log, a producer failing fast while no broker answers), or every record
    refused by the broker. The caller may act as if the append never happened."""


class RecordTooLargeError(NotAppendedError):
    """A record over the size a record may have (the topic's max.message.bytes, or the
    writer's own limit): refused before it was sent, or by the broker."""


# Kafka's default message.max.bytes (a topic's max.message.bytes unless it is set): the
# largest record batch a broker takes, its framing included.
BROKER_MAX_MESSAGE_BYTES = 1_048_588
# The largest record written by default (PINLEDGER_MAX_RECORD_BYTES): under Kafka's
# default max.message.bytes with room to spare, and librdkafka's default
# message.max.bytes.
DEFAULT_MAX_RECORD_BYTES = 1_000_000
# The largest record the adapters' producers take (max.request.size /
# message.max.bytes); the brokers' own limit is usually lower and is what counts.
PRODUCER_MAX_RECORD_BYTES = 4 * 1024 * 1024
# What a record takes beyond its value and headers, at most: the header of a batch of
# one record (61 bytes, with the log's own 12) and the record's framing (lengths,
# attributes, timestamp and offset deltas), rounded up.
RECORD_OVERHEAD = 100
# A header's framing (two varint lengths) beyond its key and value, at most.
_HEADER_OVERHEAD = 10


def record_bytes(value_bytes: int, headers: Sequence[tuple[str, bytes]]) -> int:
    """What a record of a value of `value_bytes` bytes and these headers takes against
    the broker's limit (max.message.bytes): never less than Kafka counts."""
    size = value_bytes + RECORD_OVERHEAD
    for key, value in headers:
        size += len(key) + len(value) + _HEADER_OVERHEAD
    return size


@dataclass(frozen=True, slots=True)
class Append:
    topic: str
    partition: int
    value: bytes
    headers: Headers = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LogRecord:
    topic: str
    partition: int
    offset: int
    value: bytes
    headers: Headers


@dataclass(frozen=True, slots=True)
class Position:
    """Where to start reading one partition."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A live member of a consumer group (a server) and the partitions it owns."""

    member_id: str
    partitions: list[tuple[str, int]]
    # What the member said about itself when it joined (`group_reader`'s `advertised`;
    # "" for a member that said nothing).
    advertised: str = ""
    # The id the group's coordinator gave this membership (Kafka's member.id: the
    # client id and a uuid), what `Log.remove_member` takes; "" when not known.
    group_member_id: str = ""


# A partition of a topic: (topic, partition number).
PartitionKey = tuple[str, int]

# Told the partitions a group member loses or gets in a rebalance. Called on the
# member's polling path, which may also heartbeat: hand the news over and return.
PartitionsCallback = Callable[[list[PartitionKey]], None]


class Reader(Protocol):
    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        """Up to `max_records` records after the previous ones, in log order per
        partition; an empty list when nothing arrived within the timeout."""
        ...

    def close(self) -> None: ...


class GroupReader(Protocol):
    """One member of a group (`Log.group_reader`). Use it from one thread: the one
    that polls. Closing it leaves the group, so the others take over at once."""

    def subscribe(self, topics: Iterable[str]) -> None:
        """Replace the topics this member wants partitions of; a rebalance follows
        when they changed. An empty set keeps the member in no partition."""
        ...

    def poll(self, max_records: int, timeout_ms: int) -> list[LogRecord]:
        """Up to `max_records` records of the partitions assigned to this member, in
        log order per partition, from each partition's position. A rebalance is
        carried out inside a poll: first `on_revoked` with everything the member
        held, then `on_assigned` with its new partitions. A partition it held before
        the rebalance too is read on from where it was; one new to it from its first
        record: seek each assigned partition to be sure where it reads from. Polling
        is what keeps a member in its group."""
        ...

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read an assigned partition from `offset` on; LogError when it is not
        assigned to this member."""
        ...

    def assignment(self) -> list[PartitionKey]:
        """The partitions assigned to this member now."""
        ...

    def confirmed_at(self) -> float | None:
        """When (time.monotonic) the group last confirmed this membership: the send
        time of the last heartbeat the coordinator answered, or of the join that gave
        the current assignment; None while not a member. The coordinator drops a member
        no sooner than its session timeout after that, so a member that saw this
        within half its session timeout still holds its partitions (the owner's lease:
        service/ownership/lease.py)."""
        ...

    def request_rejoin(self) -> None:
        """Make the next poll rejoin the group, so every subscribed partition is
        assigned again (the owner's remedy for a partition left unowned, and what a
        server does when it found a peer gone). Any thread may call it; a poll under
        way returns soon after."""
        ...

    def wake(self) -> None:
        """End a poll under way soon (any thread): the owner stopping, or news to act
        on. A poll also ends soon after this member was assigned partitions, so that
        its owner adopts them without waiting out the poll's timeout."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicPolicy:
    """How the log creates the project's topics. None leaves a setting to the broker's
    own default (`default.replication.factor`, `min.insync.replicas`). Retention is
    always set explicitly on every topic: -1 keeps the ledger forever (the default; it
    is the history replay and traces read); a finite retention lets the broker delete
    older records (docs/decisions/0011-replication-and-retention.md)."""

    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    retention_ms: int = -1

    def topic_configs(self, keep_forever: bool = False) -> dict[str, str]:
        """The topic-level settings every created topic gets; `keep_forever`: records
        are never deleted, whatever the retention (the catalog)."""
        configs = {
            "retention.ms": "-1" if keep_forever else str(self.retention_ms),
            # Size-based retention would delete history just as time-based would.
            "retention.bytes": "-1",
            # The ledger is an append-only history: never compacted away.
            "cleanup.policy": "delete",
        }
        if self.min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(self.min_insync_replicas)
        return configs


# What Kafka's security.protocol may be, and the SASL mechanisms pinledger speaks.
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """How clients authenticate to Kafka and protect the connection: the settings of
    every Kafka adapter (docs/security.md), each of which turns them into its
    library's own settings. Checked where they are read (service/config.py), so that a
    wrong one names its variable."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    # Never in a repr, a log line or an error (docs/security.md).
    sasl_password: str = field(default="", repr=False)
    # The CA that signed the brokers' certificates (PEM); empty: the system's CAs.
    ssl_cafile: str = ""
    # This client's certificate and key (PEM), for brokers that require one (mTLS).
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    # Whether a broker's certificate must name the host it was reached at.
    ssl_check_hostname: bool = True

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def options(self, names: SecurityNames) -> dict[str, object]:
        """These settings in a Kafka library's own words (`names`): what applies to the
        protocol, and no file that is not set."""
        found: dict[str, object] = {names.protocol: names.protocol_value(self.protocol)}
        if self.uses_sasl:
            found[names.mechanism] = self.sasl_mechanism
            found[names.username] = self.sasl_username
            found[names.password] = self.sasl_password
        if self.uses_ssl:
            found[names.check_hostname] = names.check_hostname_value(self.ssl_check_hostname)
            for key, value in (
                (names.cafile, self.ssl_cafile),
                (names.certfile, self.ssl_certfile),
                (names.keyfile, self.ssl_keyfile),
            ):
                if value:
                    found[key] = value
        return found


def _same(value: object) -> object:
    return value


@dataclass(frozen=True, slots=True)
class SecurityNames:
    """What a Kafka library calls each security setting, and how it writes the two whose
    values differ between libraries: each adapter holds one (KafkaSecurity.options)."""

    protocol: str
    mechanism: str
    username: str
    password: str
    check_hostname: str
    cafile: str
    certfile: str
    keyfile: str
    protocol_value: Callable[[str], object] = _same
    check_hostname_value: Callable[[bool], object] = _same


@dataclass(frozen=True, slots=True)
class TopicState:
    """What a running cluster holds for one topic: the settings that decide whether an
    acknowledged append survives a broker's loss and how long the history is kept."""

    name: str
    partitions: int
    # The fewest replicas any partition has.
    replicas: int
    # Partitions whose in-sync replicas are fewer than their replicas; and without a
    # leader (unavailable).
    under_replicated: int
    offline: int
    min_insync_replicas: int
    retention_ms: int
    retention_bytes: int
    cleanup_policy: str
    unclean_leader_election: bool
    # The largest record batch the topic takes (the broker's message.max.bytes unless
    # the topic sets its own).
    max_message_bytes: int = BROKER_MAX_MESSAGE_BYTES


class LogInspector(Protocol):
    """What `pinledger doctor` and the server's start-up check read from the cluster."""

    def broker_count(self) -> int:
        """Live brokers in the cluster."""
        ...

    def topic_states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        """The state of each of these topics that exists, by name."""
        ...


class Log(Protocol):
    def create_topic(self, topic: str, partitions: int, keep_forever: bool = False) -> bool:
        """Create a topic with the log's TopicPolicy; False when it exists already
        (idempotent). `keep_forever`: its records are never deleted, whatever the
        policy's retention."""
        ...

    def delete_topic(self, topic: str) -> None:
        """Delete a topic and wait until it is gone, so a topic created again under
        the same name is a new one; nothing happens when there is no such topic."""
        ...

    def partition_count(self, topic: str) -> int | None:
        """Partitions of an existing topic, None when there is no such topic."""
        ...

    def add_partitions(self, topic: str, total: int) -> bool:
        """Give an existing topic `total` partitions, and wait until they can be written
        to; False when it has that many already (idempotent: Kafka never removes a
        partition). LogError when there is no such topic."""
        ...

    def topics(self) -> set[str]:
        """Every topic of the cluster (for tools and tests: the server asks about its
        own topics only, through `existing`)."""
        ...

    def existing(self, topics: Iterable[str]) -> set[str]:
        """Which of these topics exist; a question about them only, whatever the size
        of the cluster. A topic being deleted may still be listed until it is gone."""
        ...

    def append(self, appends: Sequence[Append]) -> list[int]:
        """Append records and return their offsets, in order, once acknowledged. A
        LogError leaves open whether they are in the log, unless it is a
        NotAppendedError (none is); a record whose `record_bytes` exceed what the
        topic takes (max.message.bytes) is refused with a RecordTooLargeError."""
        ...

    def end_offset(self, topic: str, partition: int) -> int:
        """The offset the next record appended to the partition will get; LogError
        when there is no such partition."""
        ...

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """End offsets of many partitions in one request; partitions of topics that do
        not exist (a queue being deleted) are left out."""
        ...

    def start_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The first offset each partition still holds, in one request: 0 until the
        topic's retention (PINLEDGER_RETENTION_DAYS) removed its oldest records. What a
        rebuild from the log must start at or below, or it misses history. Partitions of
        topics that do not exist are left out."""
        ...

    def reader(self, positions: Sequence[Position]) -> Reader:
        """A reader of these partitions, each from its position; no group."""
        ...

    def group_reader(
        self,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        session_timeout_ms: int = 6000,
        advertised: str = "",
    ) -> GroupReader:
        """Join `group` as `member_id`, subscribed to `topics`. A member that does not
        poll within `session_timeout_ms` is dropped from the group. `advertised` (a
        short printable ASCII text) is what `group_members` lists for this member: the
        servers say which ledger formats they read (ledger/formats.py)."""
        ...

    def group_members(self, group: str) -> list[GroupMember]:
        """The live members of a group and the partitions each was assigned (a
        member's list may be empty while a rebalance is under way); an empty list for
        a group nobody is in."""
        ...

    def remove_member(self, group: str, member: GroupMember) -> bool:
        """Remove a member of `group` (as `group_members` listed it) whose process is
        known to be gone, as if it had left: the group rebalances now instead of at its
        session timeout. False when it was no longer a member."""
        ...

    def forget_deleted_topics(self) -> None:
        """Let go of what the log's clients keep about topics deleted meanwhile (by
        this or another server); a server calls it every few seconds."""
        ...

    def close(self) -> None: ...
