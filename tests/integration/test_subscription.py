"""The ledger subscription (pinledger.ledger.kafka.subscription): another system reads
the ledger with its own consumer group."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pinledger.ledger.codec import tag_of
from pinledger.ledger.descriptor import parse
from pinledger.ledger.events import Enqueued, QueueCreated
from pinledger.ledger.kafka.subscription import LedgerRecord, subscribe
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, context, dequeue_until
from tests.integration.test_api import ack, enqueue, job, lookup
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

# Ends a subscription's loop once the log has been quiet this long (joining the group
# and the first fetch happen well within it).
IDLE_S = 8.0


@pytest.fixture
def live(server: ServerProcess, config: Config) -> Iterator[Store]:
    store = Store(config.pg_dsn, server.schema)
    yield store
    store.close()


def _read(server: ServerProcess, group: str, **options: Any) -> list[LedgerRecord]:
    with subscribe(
        stack_settings().kafka, server.prefix, group, idle_timeout_s=IDLE_S, **options
    ) as records:
        return list(records)


def test_a_subscription_sees_every_event_of_a_run(
    client: Any, server: ServerProcess, live: Store
) -> None:
    queue = f"q_sub_{uuid.uuid4().hex[:8]}"
    client.createQueue(context(), queue)
    descriptors = enqueue(client, queue, *[job(b"%d" % i) for i in range(5)])
    taken = list(dequeue_until(client, queue, 5, limit=5, source="w:1"))
    ack(client, queue, ok=taken[:3], failed=taken[3:], source="w:1", retryDelayMillis=0)
    ack(client, queue, ok=taken[:1], source="w:stale")  # rejected, but in the log
    lookup(client, *descriptors)  # the projection has it all

    group = f"audit-{uuid.uuid4().hex[:8]}"
    records = _read(server, group, catalog=True)
    mine = [r for r in records if r.queue == queue]
    seen = {
        (r.partition, r.offset, idx, tag_of(event))
        for r in mine
        for idx, event in enumerate(r.envelope.events)
    }
    expected = {
        (d.partition, row.offset, row.idx, row.type)
        for d in map(parse, descriptors)
        for row in live.job_events(queue, d.partition, d.local_id)
    }
    assert seen == expected
    assert sum(isinstance(e, Enqueued) for r in mine for e in r.envelope.events) == 5
    # Per partition, in log order, each record once.
    for partition in {r.partition for r in mine}:
        offsets = [r.offset for r in mine if r.partition == partition]
        assert offsets == sorted(set(offsets))
    assert all(r.envelope.actor.server for r in mine)
    created = [
        e
        for r in records
        if r.queue is None
        for e in r.envelope.events
        if isinstance(e, QueueCreated)
    ]
    assert queue in {e.name for e in created}

    # The group's offsets were committed: it resumes after what it has read.
    (later,) = enqueue(client, queue, job(b"later"))
    again = [r for r in _read(server, group) if r.queue == queue]
    assert [(r.partition, r.offset) for r in again] == [
        (parse(later).partition, parse(later).offset)
    ]
    # A new group from the end sees nothing old.
    fresh = _read(server, f"tail-{uuid.uuid4().hex[:8]}", from_beginning=False)
    assert [r for r in fresh if r.queue == queue] == []


def test_the_servers_ownership_group_is_refused(server: ServerProcess) -> None:
    with pytest.raises(ValueError, match="ownership"):
        subscribe(stack_settings().kafka, server.prefix, f"{server.prefix}owners")
