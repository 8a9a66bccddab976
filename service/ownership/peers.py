"""The owners' group as seen from this server: its live members and what each owns,
for forwarding dequeues to peers, shared rate limits and createQueue's wait.

The members duty (maintenance/members.py) refreshes the list every `MEMBERS_EVERY_S`,
the members lane's interval (and runs the watchdog after each refresh). The rebalance
callbacks of this server's own member are in partitions.py: they change the partitions'
state under its lock.

`members` is replaced whole by the members lane and read by Thrift handler threads
(`peers_for`) without a lock: a list reference is swapped atomically, and readers use
the list they got.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

from pinledger.ledger.log import GroupMember, Log, LogError, queue_of_topic
from pinledger.service.ownership.partitions import Key, Partitions

log = logging.getLogger(__name__)

# How often the members lane's duties run (maintenance/duties.py): the members list,
# the ledger format, the queue config's resizes, retirement and adaptation.
MEMBERS_EVERY_S = 2.0
# Members of the owners' group are named after the server's Thrift address.
MEMBER_PREFIX = "pinledger@"


def member_id_of(address: str) -> str:
    return f"{MEMBER_PREFIX}{address}"


def peer_addresses(
    members: Sequence[GroupMember], topic: str, member_id: str, retired_from: int | None = None
) -> list[str]:
    """Addresses (host:port) of the other servers owning partitions of `topic` (other
    than retired ones: those from `retired_from` on)."""
    addresses = []
    for member in members:
        if member.member_id == member_id or not member.member_id.startswith(MEMBER_PREFIX):
            continue
        if any(
            t == topic and (retired_from is None or p < retired_from) for t, p in member.partitions
        ):
            addresses.append(member.member_id.removeprefix(MEMBER_PREFIX))
    return addresses


def rate_shares(
    members: Sequence[GroupMember],
    member_id: str,
    prefix: str,
    retired_from: Callable[[str], int | None],
) -> dict[str, float]:
    """For each queue the group assigns partitions of: the fraction of them (retired
    ones left out: they hold no job) assigned to `member_id`. A job is charged to the
    rate limit by the server that claims it, the owner of its partition, so this is the
    server's share of the queue's rate (service/api/ratelimit.py)."""
    total: Counter[str] = Counter()
    mine: Counter[str] = Counter()
    for member in members:
        for topic, partition in member.partitions:
            queue = queue_of_topic(prefix, topic)
            if queue is None:
                continue
            first = retired_from(queue)
            if first is not None and partition >= first:
                continue
            total[queue] += 1
            if member.member_id == member_id:
                mine[queue] += 1
    return {queue: mine[queue] / count for queue, count in total.items()}


def assignment_of(
    members: Sequence[GroupMember], topic: str, partitions: int, member_id: str
) -> list[Key] | None:
    """The partitions of `topic` assigned to `member_id`, or None while some of its
    `partitions` are assigned to no member."""
    assigned = {(t, p, member.member_id) for member in members for t, p in member.partitions}
    if len({p for t, p, _ in assigned if t == topic}) < partitions:
        return None
    return [(t, p) for t, p, member in assigned if t == topic and member == member_id]


class Peers:
    def __init__(
        self,
        kafka: Log,
        group: str,
        member_id: str,
        partitions: Partitions,
        on_change: Callable[[int], None],
    ) -> None:
        self.kafka = kafka
        self.group = group
        self.member_id = member_id
        self.partitions = partitions
        self.on_change = on_change
        self.members: list[GroupMember] = []

    def refresh(self) -> list[GroupMember] | None:
        """List the live members again (None when Kafka did not answer); tell
        `on_change` the count when it changed (0 as it is: the server decides)."""
        try:
            members = self.kafka.group_members(self.group)
        except LogError as exc:
            log.warning("cannot list the live servers: %s", exc)
            return None
        changed = len(members) != len(self.members)
        self.members = members
        if changed:
            self.on_change(len(members))
        return members

    def serves_all(self, topic: str, partitions: int) -> bool:
        """Whether every partition of `topic` is owned by a live server, and those this
        server owns are serving: what a new queue needs before its jobs can be served.
        Asks Kafka for the members afresh."""
        mine = assignment_of(
            self.kafka.group_members(self.group), topic, partitions, self.member_id
        )
        return mine is not None and self.partitions.all_serving(mine)

    def peers_for(self, topic: str, retired_from: int | None = None) -> list[str]:
        """Addresses (host:port) of other live servers owning partitions of `topic`
        (retired ones, from `retired_from` on, left out)."""
        return peer_addresses(self.members, topic, self.member_id, retired_from)

    def is_member(self, address: str) -> bool:
        """Whether the server at `address` is in the group's last listing (refreshed every
        MEMBERS_EVERY_S; a listing Kafka did not answer leaves the last one)."""
        member_id = member_id_of(address)
        return any(member.member_id == member_id for member in self.members)
