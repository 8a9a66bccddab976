"""A queue grown live, on the fakes (issue 24, part 1): Kafka's partitions first, then
the catalog's record; the owners take the new partitions, new enqueues spread over
them, jobs already enqueued keep their descriptors and are served, counts cover every
partition; a cluster whose ledger format predates resizes refuses one."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from pinledger.idl import pinlater
from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import parse
from pinledger.ledger.events import (
    Actor,
    Enqueued,
    Envelope,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueueResized,
)
from pinledger.ledger.log import GroupMember, catalog_topic, queue_topic
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.catalog_log import catalog_queues, resizes
from pinledger.projections.store import QueueRow
from pinledger.service.ownership.maintenance.queue_sizes import QueueSizes
from pinledger.service.ownership.peers import member_id_of, peer_addresses
from pinledger.service.queue_config import QueueConfig, parse_queue_config
from pinledger.service.testing.runtime import GONE, TEST_CONFIG, Node, Runtime, job

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=2)


def _partition(descriptor: str) -> int:
    return parse(descriptor).partition


def test_a_queue_grows_live_and_every_job_is_served() -> None:
    with Runtime(CONFIG) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")
        before = [d for i in range(4) for d in a.enqueue("mail", job(b"old %d" % i))]
        assert {_partition(d) for d in before} == {0, 1}

        rt.resize_queue("mail", 6)
        assert rt.log.partition_count(queue_topic(CONFIG.topic_prefix, "mail")) == 6
        rt.advance_until(
            lambda: sorted(a.serving() + b.serving()) == [("mail", p) for p in range(6)],
            "the two owners to serve the six partitions",
        )
        rt.advance_until(
            lambda: {q.name: q.partitions for q in rt.store.queues()}.get("mail") == 6,
            "the catalog projection to list six partitions",
        )
        rt.clock.advance(2)  # the queue directories re-read the catalog every second
        after = [d for i in range(12) for d in b.enqueue("mail", job(b"new %d" % i))]
        assert {_partition(d) for d in after} == set(range(6))
        rt.settle()

        # Jobs enqueued before keep their descriptors, and are served with the new ones.
        assert a.lookup(before[0]).jobState == pinlater.PinLaterJobState.PENDING
        assert a.count("mail") == len(before) + len(after)
        got: dict[str, bytes] = {}

        def served() -> bool:
            got.update(a.dequeue("mail", 50))  # topped up from b's partitions too
            return len(got) == len(before) + len(after)

        rt.advance_until(served, "every job, old and new, to be dequeued")
        assert set(got) == set(before) | set(after)


def test_a_queue_keeps_every_partition_and_takes_jobs_on_the_first_n() -> None:
    queues = {"mail": QueueRow("mail", 4, 1)}
    assert queues["mail"].open == 4  # never resized: all of them
    fold_queue_event(queues, QueueResized("mail", 6, "ops"), 2)
    assert queues["mail"] == QueueRow("mail", 6, 1, open_partitions=6)
    fold_queue_event(queues, QueueResized("mail", 3, "shrunk"), 3)
    assert (queues["mail"].partitions, queues["mail"].open) == (6, 3)
    fold_queue_event(queues, QueueResized("mail", 5, "grown again"), 4)
    assert (queues["mail"].partitions, queues["mail"].open) == (6, 5)
    fold_queue_event(queues, QueueResized("other", 9, "no such queue"), 4)
    assert "other" not in queues
    fold_queue_event(queues, QueueDeleted("mail"), 5)
    fold_queue_event(queues, QueueCreated("mail", 2), 6)
    assert queues["mail"] == QueueRow("mail", 2, 6)


def test_a_queue_shrunk_drains_the_rest_and_grown_again_uses_them_again() -> None:
    with Runtime(dataclasses.replace(CONFIG, partitions=4)) as rt:
        a = rt.node()
        a.create_queue("mail")
        before = [d for i in range(8) for d in a.enqueue("mail", job(b"old %d" % i))]
        assert {_partition(d) for d in before} == set(range(4))

        rt.resize_queue("mail", 2)
        rt.advance_until(
            lambda: {q.name: q.open for q in rt.store.queues()}.get("mail") == 2,
            "the catalog projection to take jobs on two partitions",
        )
        rt.clock.advance(2)  # the queue directory re-reads the catalog every second
        during = [d for i in range(8) for d in a.enqueue("mail", job(b"new %d" % i))]
        assert {_partition(d) for d in during} == {0, 1}
        assert rt.log.partition_count(queue_topic(CONFIG.topic_prefix, "mail")) == 4
        rt.settle()
        # The draining partitions' jobs are dequeued as before.
        got: dict[str, bytes] = {}

        def served() -> bool:
            got.update(a.dequeue("mail", 50))
            return len(got) == len(before) + len(during)

        rt.advance_until(served, "every job to be dequeued")

        rt.resize_queue("mail", 4)  # Kafka has them already: nothing added
        rt.advance_until(
            lambda: {q.name: q.open for q in rt.store.queues()}.get("mail") == 4,
            "the catalog projection to take jobs on four partitions again",
        )
        rt.clock.advance(2)
        after = [d for i in range(8) for d in a.enqueue("mail", job(b"again %d" % i))]
        assert {_partition(d) for d in after} == set(range(4))


def test_a_cluster_at_format_1_refuses_a_resize_and_adds_no_partition() -> None:
    with Runtime(CONFIG) as rt:
        rt.create_queue("mail", 2)
        rt.writer.follow_format(formats.PLAIN)
        with pytest.raises(formats.FormatTooOldError, match="pinledger upgrade-format"):
            rt.writer.resize_queue("mail", 4, rt.clock.now_ms(), Actor("test"), "a test")
        assert rt.log.partition_count(queue_topic(CONFIG.topic_prefix, "mail")) == 2


def test_fake_log_adds_partitions_idempotently() -> None:
    with Runtime(CONFIG) as rt:
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        rt.create_queue("mail", 2)
        assert rt.log.add_partitions(topic, 4) is True
        assert rt.log.add_partitions(topic, 4) is False
        assert rt.log.add_partitions(topic, 3) is False
        assert rt.log.partition_count(topic) == 4


def _config(partitions: int) -> QueueConfig:
    return parse_queue_config(
        json.dumps({"queues": [{"name": "mail", "queueConfig": {"partitions": partitions}}]})
    )


def test_raising_partitions_in_the_queue_config_grows_the_queue_once() -> None:
    with Runtime(CONFIG) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")
        for node in (a, b):
            node.queue_config = _config(2)
        now = rt.clock.now_ms()
        assert [n.owner.duties.queue_sizes.run(now) for n in (a, b)] == [[], []]

        for node in (a, b):
            node.queue_config = _config(5)  # the file was edited: the servers re-read it
        rt.advance_until(
            lambda: {q.name: q.partitions for q in rt.store.queues()}.get("mail") == 5,
            "the catalog owner to grow the queue to five partitions",
        )
        rt.wait_serving("mail", 5, [a, b])
        catalog = [
            e
            for r in rt.log.records(catalog_topic(CONFIG.topic_prefix), 0)
            for e in codec.decode(r.value).events
        ]
        resizes = [e for e in catalog if isinstance(e, QueueResized)]
        assert resizes == [QueueResized("mail", 5, "queue config: partitions 5")]

        for node in (a, b):
            node.queue_config = _config(3)  # lowered: partitions 3 and 4 drain
        rt.advance_until(
            lambda: {q.name: q.open for q in rt.store.queues()}.get("mail") == 3,
            "the catalog owner to shrink the queue to three partitions",
        )
        assert {q.name: q.partitions for q in rt.store.queues()}["mail"] == 5


def test_the_queue_config_cannot_grow_a_queue_on_a_format_1_cluster() -> None:
    with Runtime(CONFIG) as rt:
        rt.create_queue("mail", 2)
        rt.writer.follow_format(formats.PLAIN)
        growth = QueueSizes(
            rt.writer,
            lambda: _config(4),
            lambda: [QueueRow("mail", 2, 0)],
            rt.clock,
            Actor("t"),
        )
        assert growth.run(rt.clock.now_ms()) == []
        assert rt.log.partition_count(queue_topic(CONFIG.topic_prefix, "mail")) == 2


def test_a_queues_resizes_are_read_from_the_catalog_with_their_reasons() -> None:
    actor = Actor("pinledger:queue-resize", "r", "host")
    envelopes = [
        Envelope(1, actor, (QueueCreated("mail", 2),)),
        Envelope(2, actor, (QueueResized("mail", 6, "grow"), QueueResized("other", 3, ""))),
        Envelope(3, actor, (QueueDeleted("mail"),)),
        Envelope(4, actor, (QueueCreated("mail", 4),)),
        Envelope(5, actor, (QueueResized("mail", 2, "shrink"),)),
        Envelope(6, actor, (PartitionsRetired("mail", 2, "drained"),)),
    ]
    # The queue deleted and created again is another queue: only its own changes.
    assert [(e.at, r, n) for e, r, n in resizes(envelopes, "mail")] == [
        (5, QueueResized("mail", 2, "shrink"), 4),
        (6, PartitionsRetired("mail", 2, "drained"), 4),
    ]
    assert catalog_queues(envelopes)["mail"].open == 2


# Closed partitions retire five seconds after their last job was collected, which is
# five seconds after its success: the fake clock moves through them in steps.
RETIRING = dataclasses.replace(
    CONFIG, partitions=4, succeeded_ttl_s=5.0, gc_interval_s=1.0, retire_after_s=5.0
)


def _row(rt: Runtime, name: str = "mail") -> QueueRow:
    return {q.name: q for q in rt.store.queues()}[name]


def _retired(node: Node) -> list[int]:
    with node.owner.partitions.lock:
        return sorted(o.partition for o in node.owner.partitions.owned.values() if o.retired)


def _drain(rt: Runtime, node: Node, jobs: int) -> None:
    """Dequeue and ack `jobs` jobs as a worker does."""
    done: set[str] = set()

    def served() -> bool:
        got = node.dequeue("mail", 50)
        node.ack("mail", succeeded=list(got))
        done.update(got)
        return len(done) == jobs

    rt.advance_until(served, f"{jobs} jobs to be dequeued and acked")


def test_drained_partitions_retire_and_a_resize_reopens_them() -> None:
    with Runtime(RETIRING) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")
        rt.wait_serving("mail", 4, [a, b])
        before = [d for i in range(8) for d in a.enqueue("mail", job(b"old %d" % i))]
        rt.resize_queue("mail", 2)
        rt.advance_until(lambda: _row(rt).open == 2, "the queue to take jobs on two partitions")
        rt.clock.advance(2)
        # Closed partitions with jobs in them do not retire, however long they wait.
        rt.clock.advance(30)
        rt.settle()
        assert _row(rt).retired_from is None
        assert _row(rt).state_of(3) == "draining"

        _drain(rt, a, len(before))
        rt.advance_until(
            lambda: _row(rt).retired_from == 2, "partitions 2 and 3 to retire", step_s=0.5
        )
        catalog = [
            e
            for r in rt.log.records(catalog_topic(CONFIG.topic_prefix), 0)
            for e in codec.decode(r.value).events
        ]
        assert [e for e in catalog if isinstance(e, PartitionsRetired)] == [
            PartitionsRetired("mail", 2, "partitions 2..3 drained: empty for 5 s")
        ]
        assert [_row(rt).state_of(p) for p in range(4)] == [
            "serving",
            "serving",
            "retired",
            "retired",
        ]
        rt.advance_until(
            lambda: _retired(a) + _retired(b) == [2, 3], "the owners to retire partitions 2, 3"
        )
        # A retired partition is nobody's work: no peer is asked for the queue on its
        # account (peer_addresses, below, for every placement).
        for node, peer in ((a, b), (b, a)):
            works = any(p < 2 for q, p in peer.serving() if q == "mail")
            assert node.owner.peers_for("mail") == ([peer.address] if works else [])
        assert a.count("mail") == 0

        rt.resize_queue("mail", 4)  # grown again: the retired partitions take jobs again
        rt.advance_until(lambda: _row(rt).open == 4, "the queue to take jobs on four again")
        assert _row(rt).retired_from == 4 and _row(rt).state_of(3) == "serving"
        rt.advance_until(lambda: _retired(a) + _retired(b) == [], "the owners to reopen them")
        rt.clock.advance(2)
        after = [d for i in range(8) for d in a.enqueue("mail", job(b"again %d" % i))]
        assert {_partition(d) for d in after} == set(range(4))
        rt.settle()
        _drain(rt, a, len(after))


def test_a_job_that_turns_up_in_a_retired_partition_is_served_and_it_retires_again() -> None:
    with Runtime(RETIRING) as rt:
        a = rt.node()
        a.create_queue("mail")
        rt.resize_queue("mail", 2)
        rt.advance_until(
            lambda: _row(rt).retired_from == 2, "the empty partitions to retire", step_s=0.5
        )
        rt.advance_until(lambda: _retired(a) == [2, 3], "the owner to retire partitions 2, 3")
        # A server that had not seen the resize enqueues to partition 3 all the same.
        rt.writer.append("mail", 3, [Enqueued(b"late", 1, 0, 1)], rt.clock.now_ms(), Actor("t"))
        rt.advance_until(
            lambda: _row(rt).retired_from == 4, "the retirement to be undone", step_s=0.5
        )
        rt.advance_until(lambda: _retired(a) == [], "the owner to work on them again")
        got = {}
        rt.advance_until(lambda: bool(got.update(a.dequeue("mail", 5)) or got), "the late job")
        assert list(got.values()) == [b"late"] and _partition(next(iter(got))) == 3
        a.ack("mail", succeeded=list(got))
        rt.advance_until(
            lambda: _row(rt).retired_from == 2, "partitions 2, 3 to retire again", step_s=0.5
        )


def test_retirements_fold_as_the_projection_writes_them() -> None:
    queues = {"mail": QueueRow("mail", 6, 1)}
    fold_queue_event(queues, PartitionsRetired("mail", 2, "open ones never retire"), 2)
    assert queues["mail"].retired_from is None
    fold_queue_event(queues, QueueResized("mail", 2, "shrunk"), 3)
    fold_queue_event(queues, PartitionsRetired("mail", 2, "drained"), 4)
    assert [queues["mail"].state_of(p) for p in range(6)] == ["serving"] * 2 + ["retired"] * 4
    assert queues["mail"].active == 2
    fold_queue_event(queues, QueueResized("mail", 1, "shrunk again"), 5)
    assert [queues["mail"].state_of(p) for p in range(3)] == ["serving", "draining", "retired"]
    fold_queue_event(queues, QueueResized("mail", 4, "grown"), 6)
    assert queues["mail"].retired_from == 4 and queues["mail"].active == 4
    assert [queues["mail"].state_of(p) for p in range(6)] == ["serving"] * 4 + ["retired"] * 2
    fold_queue_event(queues, PartitionsRetired("mail", 6, "undone"), 7)
    assert [queues["mail"].state_of(p) for p in range(6)] == ["serving"] * 4 + ["draining"] * 2


def test_a_server_owning_only_retired_partitions_is_asked_for_no_dequeue() -> None:
    topic = "rt.q.mail"
    members = [
        GroupMember(member_id_of("a:1"), [(topic, 2), (topic, 3)]),
        GroupMember(member_id_of("b:1"), [(topic, 0), (topic, 1), ("rt.q.other", 3)]),
        GroupMember(member_id_of("c:1"), [(topic, 1), (topic, 4)]),
    ]
    me = member_id_of("b:1")
    assert peer_addresses(members, topic, me) == ["a:1", "c:1"]
    assert peer_addresses(members, topic, me, retired_from=2) == ["c:1"]
    assert peer_addresses(members, topic, me, retired_from=1) == []


def test_jobs_of_a_partition_the_directory_does_not_list_yet_are_acked_and_read() -> None:
    """Kafka's partitions are added before the catalog's record, and the queue
    directories re-read the catalog every second: a server can hand out a job of a new
    partition (its own, or a peer's through a forwarded dequeue) before its directory
    lists it. The worker's ack, checkpoint and lookup of it are accepted (the topic has
    the partition), and a descriptor past the topic's partitions is still refused."""
    with Runtime(CONFIG) as rt:
        a = rt.node()
        a.create_queue("mail")
        # The directory reads the catalog a moment after it changed: held here, with
        # what it read before the resize.
        before = rt.store.queues()
        a.queues.store = SimpleNamespace(queues=lambda: before)
        rt.resize_queue("mail", 4)
        rt.writer.enqueue("mail", 3, [Enqueued(b"early", 1, 0, 1)], rt.clock.now_ms(), GONE)
        assert a.queues.get("mail").partitions == 2  # type: ignore[union-attr]
        got: dict[str, bytes] = {}

        def dequeued() -> bool:
            got.update(a.dequeue("mail", 5))
            return bool(got)

        rt.advance_until(dequeued, "the job of the new partition to be handed out")
        [descriptor] = got
        assert _partition(descriptor) == 3
        assert a.queues.get("mail").partitions == 2  # type: ignore[union-attr]
        a.checkpoint("mail", descriptor)
        a.ack("mail", succeeded=[descriptor])
        rt.settle()
        assert a.lookup(descriptor).jobState == pinlater.PinLaterJobState.SUCCEEDED
        beyond = descriptor.replace(":s3:", ":s4:", 1)
        with pytest.raises(pinlater.PinLaterException) as refused:
            a.ack("mail", succeeded=[beyond])
        assert "has no partition 4 (it has 4)" in refused.value.message
