"""A queue grown live, on the fakes (issue 24, part 1): Kafka's partitions first, then
the catalog's record; the owners take the new partitions, new enqueues spread over
them, jobs already enqueued keep their descriptors and are served, counts cover every
partition; a cluster whose ledger format predates resizes refuses one."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

from pinledger.idl import pinlater
from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import parse
from pinledger.ledger.events import Actor, Envelope, QueueCreated, QueueDeleted, QueueResized
from pinledger.ledger.log import catalog_topic, queue_topic
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.catalog_log import catalog_queues, resizes
from pinledger.projections.store import QueueRow
from pinledger.service.ownership.queue_sizes import QueueSizes
from pinledger.service.queue_config import QueueConfig, parse_queue_config
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

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


def _owns_catalog(node: Node) -> bool:
    return node.owner.partitions.catalog is not None


def _config(partitions: int) -> QueueConfig:
    return parse_queue_config(
        json.dumps({"queues": [{"name": "mail", "queueConfig": {"partitions": partitions}}]})
    )


def test_raising_partitions_in_the_queue_config_grows_the_queue_once() -> None:
    with Runtime(CONFIG) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")
        config = _config(2)
        for node in (a, b):
            node.owner.queue_sizes = QueueSizes(
                node.writer,
                functools.partial(_owns_catalog, node),
                lambda: config,
                node.queues.rows,
                rt.clock,
                Actor("pinledger:queue-config", server=node.config.server_id),
            )
        assert [n.owner.queue_sizes.check() for n in (a, b)] == [[], []]  # type: ignore[union-attr]

        config = _config(5)  # the file was edited: the servers re-read it
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

        config = _config(3)  # lowered: partitions 3 and 4 drain
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
            lambda: True,
            lambda: _config(4),
            lambda: [QueueRow("mail", 2, 0)],
            rt.clock,
            Actor("t"),
        )
        assert growth.check() == []
        assert rt.log.partition_count(queue_topic(CONFIG.topic_prefix, "mail")) == 2


def test_a_queues_resizes_are_read_from_the_catalog_with_their_reasons() -> None:
    actor = Actor("pinledger:queue-resize", "r", "host")
    envelopes = [
        Envelope(1, actor, (QueueCreated("mail", 2),)),
        Envelope(2, actor, (QueueResized("mail", 6, "grow"), QueueResized("other", 3, ""))),
        Envelope(3, actor, (QueueDeleted("mail"),)),
        Envelope(4, actor, (QueueCreated("mail", 4),)),
        Envelope(5, actor, (QueueResized("mail", 2, "shrink"),)),
    ]
    # The queue deleted and created again is another queue: only its own resize.
    assert [(e.at, r.partitions, r.reason) for e, r in resizes(envelopes, "mail")] == [
        (5, 2, "shrink")
    ]
    assert catalog_queues(envelopes)["mail"].open == 2
