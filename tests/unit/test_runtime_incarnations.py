"""A queue deleted and created again under its name, on the fakes: the new queue never
holds the old one's jobs, and never skips its own. The catalog's deletion removes the
queue's rows and offsets; an owner that adopts the old topic's partitions again before
they leave its assignment (a reload after a failed pass, a rebalance, a fenced batch)
must not bring them back, and the creation starts the new queue from offset 0."""

from __future__ import annotations

import dataclasses

import pytest

from pinledger.idl import pinlater
from pinledger.ledger import codec
from pinledger.ledger.events import Envelope, QueueDeleted
from pinledger.ledger.log import Append, catalog_topic, queue_topic
from pinledger.service.security.password import hash_password
from pinledger.service.testing.runtime import (
    CALLER,
    GONE,
    TEST_CONFIG,
    Runtime,
    job,
    wait_until,
)

PREFIX = TEST_CONFIG.topic_prefix
PASSWORD = "let me in"


def _append_deletion_only(rt: Runtime, name: str) -> None:
    """The first half of deleteQueue: the catalog's record, the topic not deleted yet
    (Kafka deletes topics asynchronously; a server may also fail between the two)."""
    value = codec.encode(Envelope(rt.clock.now_ms(), GONE, (QueueDeleted(name),)))
    rt.log.append([Append(catalog_topic(PREFIX), 0, value)])


def _rows(rt: Runtime, queue: str) -> list[bytes]:
    return sorted(job.body for (q, _, _), (job, *_) in rt.store._jobs.items() if q == queue)


def test_a_reload_between_a_queues_deletion_and_its_topics_removal_brings_nothing_back() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        node.create_queue("other")
        node.enqueue("mail", *(job(f"old-{i}".encode()) for i in range(5)))
        rt.settle()
        assert len(_rows(rt, "mail")) == 5

        # The owner's subscription follows the catalog a moment later (a queue
        # directory's refresh, then a rebalance): held here, so that the reload below
        # falls in that moment.
        subscription = node.owner.topics
        set_queues = subscription.set_queues
        subscription.set_queues = lambda names: None  # type: ignore[method-assign]
        _append_deletion_only(rt, "mail")
        rt.settle()
        assert _rows(rt, "mail") == []  # the catalog's deletion took the rows

        # A failed pass makes the owner reload every partition it is assigned, the old
        # topic's among them (its directory has not re-read the catalog yet).
        rt.store.fail()
        rt.writer.append("other", 0, [], rt.clock.now_ms(), GONE)
        wait_until(lambda: node.owner.partitions.reload_pending, "a failed pass")
        rt.store.recover()
        rt.advance_until(lambda: not node.owner.partitions.reload_pending, "the reload")
        rt.settle()
        assert _rows(rt, "mail") == [], "the deleted queue's jobs came back"
        subscription.set_queues = set_queues  # type: ignore[method-assign]

        rt.log.delete_topic(queue_topic(PREFIX, "mail"))
        node.create_queue("mail")
        new = node.enqueue("mail", *(job(f"new-{i}".encode()) for i in range(3)))
        rt.settle()
        assert _rows(rt, "mail") == [b"new-0", b"new-1", b"new-2"]
        for descriptor in new:
            assert node.lookup(descriptor) is not None, f"{descriptor} was never projected"


def test_a_topic_left_by_a_deleted_queue_is_removed_and_creation_asks_for_a_retry() -> None:
    """A deletion whose topic removal failed (or has not happened yet: Kafka deletes
    topics in the background) leaves the old topic: createQueue under the name once
    answered OK for a queue that did not exist. It now removes the topic and asks for a
    retry, which creates the queue."""
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        node.enqueue("mail", job(b"old"))
        rt.settle()
        _append_deletion_only(rt, "mail")
        rt.settle()
        topic = queue_topic(PREFIX, "mail")
        assert rt.log.existing([topic])

        with pytest.raises(pinlater.PinLaterException, match="retry createQueue") as refused:
            node.create_queue("mail")
        assert "left from a queue of that name deleted" in refused.value.message
        assert not rt.log.existing([topic])
        node.create_queue("mail")
        [new] = node.enqueue("mail", job(b"new"))
        rt.settle()
        assert _rows(rt, "mail") == [b"new"]
        assert node.lookup(new) is not None


def test_a_deletion_retried_after_its_topic_removal_failed_removes_the_topic() -> None:
    config = dataclasses.replace(
        TEST_CONFIG, admin_salt="s", admin_password_sha256=hash_password(PASSWORD, "s")
    )
    with Runtime(config) as rt:
        node = rt.node()
        node.create_queue("mail")
        _append_deletion_only(rt, "mail")
        rt.settle()
        topic = queue_topic(PREFIX, "mail")
        rt.call_waiting(lambda: node.handler.deleteQueue(CALLER, "mail", PASSWORD))
        assert not rt.log.existing([topic])
