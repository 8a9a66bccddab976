"""The owners' group as a server sees it: which peers a dequeue is forwarded to, and
when a new queue's partitions all have owners."""

from __future__ import annotations

from pinledger.ledger.log import GroupMember
from pinledger.service.ownership.membership import assignment_of, member_id_of, peer_addresses

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
