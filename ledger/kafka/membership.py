"""The owners' group membership on kafka-python, on its own: joining a group
(`KafkaGroupReader`) and describing its members (`describe_group`, asked through an
admin client: `KafkaAdmin`). The librdkafka adapter (ledger/rdkafka/), which has no
kafka-python producer of its own, delegates group membership here whole
(docs/decisions/0021-librdkafka-adapter.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import MemberToRemove
from kafka.errors import GroupIdNotFoundError, NoError, UnknownMemberIdError

from pinledger.ledger.kafka import patches
from pinledger.ledger.kafka.errors import translated
from pinledger.ledger.kafka.group import KafkaGroupReader, advertised_by
from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import GroupMember, LogError, PartitionsCallback


def describe_group(admin: KafkaAdminClient, group: str, bootstrap: str) -> list[GroupMember]:
    """Live members of a consumer group with the partitions each owns (Log.group_members)."""
    with translated(f"cannot describe consumer group {group}", bootstrap):
        described = admin.describe_groups([group])
    info = described.get(group, {}) if isinstance(described, dict) else {}
    error = str(info.get("error") or "")
    if GroupIdNotFoundError.__name__ in error:
        return []  # no member has ever joined (kafka-python gives the error as text)
    if error:
        # Not "no members": the broker asked could not say (often NotCoordinator
        # after the brokers restarted). Ask the right one next time.
        patches.forget_group_coordinator(admin, group)
        raise LogError(
            f"cannot describe consumer group {group}: {error} (looking its coordinator up again)"
        )
    members = []
    for member in info.get("members") or []:
        assignment = member.get("member_assignment") or {}
        owned = [
            (topic, partition)
            for topic, partitions in _assigned_partitions(assignment)
            for partition in partitions
        ]
        members.append(
            GroupMember(
                member_id=str(member.get("client_id", "")),
                partitions=owned,
                advertised=advertised_by(member.get("member_metadata")),
                group_member_id=str(member.get("member_id", "")),
            )
        )
    return members


def remove_member(admin: KafkaAdminClient, group: str, member: GroupMember, bootstrap: str) -> bool:
    """Log.remove_member: a LeaveGroup for a member that can no longer send its own
    (Kafka 2.3+ takes it from any client: KIP-345's batched LeaveGroup, which names
    dynamic members by member id too). False when the member was gone already."""
    if not member.group_member_id:
        return False
    with translated(f"cannot remove {member.member_id} from group {group}", bootstrap):
        try:
            answers = admin.remove_group_members(
                group, [MemberToRemove(member_id=member.group_member_id, reason="process gone")]
            )
        except (UnknownMemberIdError, GroupIdNotFoundError):
            return False
    error = next(iter(answers.values()), NoError) if answers else NoError
    if error is UnknownMemberIdError:
        return False
    if error is not NoError:
        raise LogError(f"cannot remove {member.member_id} from group {group}: {error.__name__}")
    return True


def _assigned_partitions(assignment: dict[str, Any]) -> list[tuple[str, list[int]]]:
    """The (topic, partitions) pairs of a decoded ConsumerAssignment, as kafka-python 3
    returns it: {"assigned_partitions": [{"topic": ..., "partitions": [...]}]}."""
    return [
        (str(pair["topic"]), [int(p) for p in pair["partitions"]])
        for pair in assignment.get("assigned_partitions") or []
    ]


class KafkaGroupMembership:
    """Group membership alone, for an adapter that does everything else without
    kafka-python's producer: the group readers (their members are described by
    `KafkaAdmin.group_members`). Constructing it checks the kafka-python version (the
    group readers rely on patches.poll_group)."""

    def __init__(self, settings: KafkaSettings) -> None:
        patches.check_kafka_python()
        self._settings = settings

    def group_reader(
        self,
        group: str,
        topics: Iterable[str],
        member_id: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        session_timeout_ms: int,
        advertised: str = "",
    ) -> KafkaGroupReader:
        return KafkaGroupReader(
            self._settings,
            group,
            topics,
            member_id,
            on_revoked,
            on_assigned,
            session_timeout_ms,
            advertised,
        )
