"""Queues paused from the catalog in the Store contract (decision 0035): the catalog's
QueuePaused projected into `queues.paused` as the catalog's fold says, one record at a
time or in one batch; a queue created again under the name starts unpaused; a replay
into a scratch schema and the verify agree with the live projection. And the queue
controls' workers view: `claim_holders`, each claim source's IN_PROGRESS jobs and last
heartbeat. On Postgres, MariaDB, a sharded store and the FakeStore alike."""

from __future__ import annotations

import pytest

from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import local_id_for
from pinledger.ledger.events import (
    Actor,
    Claimed,
    Enqueued,
    Envelope,
    Event,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    Succeeded,
)
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import LogRecord, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.catalog_log import catalog_queues
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import CatalogProjector, ProjectionRunner, Scope
from pinledger.projections.replay import replay
from pinledger.projections.store import ClaimHolder, LedgerStore
from pinledger.projections.verify import verify
from tests.contract.store_fixtures import PREFIX, scratch, store

__all__ = ["scratch", "store"]  # the fixtures, used by name

T0 = 1_700_000_000_000
OPERATOR = Actor("pinledger:queue-pause by ops@host", "", "host")

PAUSES: tuple[tuple[Event, ...], ...] = (
    (QueueCreated("mail", 2), QueueCreated("old", 1), QueueCreated("calm", 1)),
    (QueuePaused("mail", True, "the provider is down"),),
    (QueuePaused("mail", True, "again"),),
    (QueuePaused("calm", True, ""), QueuePaused("calm", False, "changed my mind")),
    (QueuePaused("nowhere", True, "no such queue"),),
    (QueuePaused("old", True, "before its deletion"),),
    (QueueDeleted("old"), QueueCreated("old", 1)),
    (QueuePaused("born", True, "before its creation"), QueueCreated("born", 1)),
)


def _catalog(*records: tuple[Event, ...]) -> list[LogRecord]:
    topic = catalog_topic(PREFIX)
    return [
        LogRecord(topic, 0, offset, codec.encode(Envelope(T0 + offset, OPERATOR, events)), [])
        for offset, events in enumerate(records)
    ]


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_pauses_project_as_the_catalog_folds_them(store: LedgerStore, one_at_a_time: bool) -> None:
    records = _catalog(*PAUSES)
    folded = catalog_queues([codec.decode(r.value) for r in records])
    catalog = CatalogProjector(store, PREFIX)
    if one_at_a_time:
        for record in records:
            catalog.apply([record])
    else:
        catalog.apply(records)
    projected = {row.name: row.paused for row in store.queues()}
    assert projected == {name: row.paused for name, row in folded.items()}
    assert projected == {"born": False, "calm": False, "mail": True, "old": False}


def test_a_replay_and_the_verify_agree_on_pauses(store: LedgerStore, scratch: LedgerStore) -> None:
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("mail", 1, T0, OPERATOR)
    writer.create_queue("calm", 1, T0, OPERATOR)
    writer.follow_format(formats.LATEST)
    writer.pause_queue(QueuePaused("mail", True, "held"), T0 + 1, OPERATOR)
    writer.pause_queue(QueuePaused("calm", True, "held"), T0 + 2, OPERATOR)
    writer.pause_queue(QueuePaused("calm", False, "let go"), T0 + 3, OPERATOR)
    live = ProjectionRunner(store, log, PREFIX)
    try:
        live.catch_up()
    finally:
        live.close()
    assert {row.name: row.paused for row in store.queues()} == {"calm": False, "mail": True}
    if isinstance(store, FakeStore):  # a replay diffs two schemas of one database
        scratch = FakeStore("scratch", store.database)
    report = replay(store, scratch, log, PREFIX, Scope())
    assert report.identical, report.diffs
    assert {row.name: row.paused for row in scratch.queues()} == {"calm": False, "mail": True}
    assert verify(store, log, PREFIX, Scope()).identical


# -- the workers view's claim holders ----------------------------------------------------


def test_claim_holders_count_each_sources_jobs_and_its_last_heartbeat(store: LedgerStore) -> None:
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("mail", 2, T0, OPERATOR)
    writer.create_queue("other", 1, T0, OPERATOR)
    enqueued = [Enqueued(b"%d" % i, 1, T0, 1) for i in range(4)]
    first = writer.append("mail", 0, enqueued, T0, OPERATOR)
    second = writer.append("mail", 1, enqueued[:2], T0, OPERATOR)
    elsewhere = writer.append("other", 0, enqueued[:1], T0, OPERATOR)
    ids = [local_id_for(first, i) for i in range(4)]
    worker_a, worker_b = Actor("worker:a", "", "h"), Actor("worker:b", "", "h")
    writer.append("mail", 0, [Claimed(ids[0], "c1"), Claimed(ids[1], "c1")], T0 + 10, worker_a)
    writer.append("mail", 1, [Claimed(local_id_for(second, 0), "c2")], T0 + 30, worker_a)
    writer.append("mail", 0, [Claimed(ids[2], "c3")], T0 + 20, worker_b)
    writer.append("mail", 0, [Claimed(ids[3], "c4")], T0 + 25, worker_b)
    writer.append("mail", 0, [Succeeded(ids[3], "", "c4")], T0 + 26, worker_b)
    writer.append("other", 0, [Claimed(local_id_for(elsewhere, 0), "c5")], T0 + 40, worker_b)
    live = ProjectionRunner(store, log, PREFIX)
    try:
        live.catch_up()
    finally:
        live.close()
    assert store.claim_holders("mail", 10) == [
        ClaimHolder("worker:a", 3, T0 + 30),
        ClaimHolder("worker:b", 1, T0 + 20),
    ]
    assert store.claim_holders("mail", 1) == [ClaimHolder("worker:a", 3, T0 + 30)]
    assert store.claim_holders("nowhere", 10) == []
