"""The owners' group as a server sees it: which peers a dequeue is forwarded to, when a
new queue's partitions all have owners, and this server's share of each queue's rate
limit."""

from __future__ import annotations

from pinledger.ledger.log import GroupMember
from pinledger.service.ownership.peers import (
    assignment_of,
    member_id_of,
    peer_addresses,
    rate_shares,
)

ME = member_id_of("a:1")
MEMBERS = [
    GroupMember(ME, [("p.q.mail", 0), ("p.q.thumbs", 0)]),
    GroupMember("pinledger@b:1", [("p.q.mail", 1)]),
    GroupMember("pinledger@c:1", [("p.q.thumbs", 1)]),
    GroupMember("someone-else", [("p.q.mail", 2)]),
]


def test_a_dequeue_is_forwarded_to_the_other_servers_owning_the_queue() -> None:
    assert peer_addresses(MEMBERS, "p.q.mail", ME) == ["b:1"]
    assert peer_addresses(MEMBERS, "p.q.thumbs", ME) == ["c:1"]
    assert peer_addresses(MEMBERS, "p.q.none", ME) == []


def test_a_queue_with_an_unassigned_partition_is_not_served_yet() -> None:
    assert assignment_of(MEMBERS, "p.q.thumbs", 3, ME) is None
    assert assignment_of([], "p.q.thumbs", 1, ME) is None


def test_a_fully_assigned_queue_names_this_servers_share() -> None:
    assert assignment_of(MEMBERS, "p.q.thumbs", 2, ME) == [("p.q.thumbs", 0)]
    assert sorted(assignment_of(MEMBERS, "p.q.mail", 3, "pinledger@b:1") or []) == [("p.q.mail", 1)]


def test_a_servers_rate_share_is_its_share_of_the_queues_live_partitions() -> None:
    members = [*MEMBERS, GroupMember("pinledger@b:1", [("p.q.thumbs", 2), ("p.catalog", 0)])]
    assert rate_shares(members, ME, "p.", lambda _: None) == {"mail": 1 / 3, "thumbs": 1 / 3}
    # thumbs' partitions from 2 on are retired: they hold no job.
    retired = {"thumbs": 2}
    assert rate_shares(members, ME, "p.", retired.get) == {"mail": 1 / 3, "thumbs": 1 / 2}
    assert rate_shares(members, "pinledger@c:1", "p.", retired.get) == {"mail": 0, "thumbs": 1 / 2}
