"""Periodic jobs' ticks in the Store contract (decision 0038): the catalog's
ScheduleTicked projected into `schedule_ticks` as the catalog's fold says
(projections/schedule_ticks.py), one record at a time or in one batch: a schedule's tick
only rises, an equal or earlier one changes nothing, a tick of a queue the catalog does
not have records nothing, a queue's deletion drops its schedules' ticks and a queue
created again starts with none; `schedule_ticks()` answers them by queue and schedule.
A replay into a scratch schema and the verify agree with the live projection. On
Postgres, MariaDB, a sharded store and the FakeStore alike."""

from __future__ import annotations

import pytest

from pinledger.ledger import codec, formats
from pinledger.ledger.events import (
    Actor,
    Envelope,
    Event,
    QueueCreated,
    QueueDeleted,
    ScheduleTicked,
)
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import LogRecord, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import CatalogProjector, ProjectionRunner, Scope
from pinledger.projections.replay import replay
from pinledger.projections.schedule_ticks import ticks_of
from pinledger.projections.store import LedgerStore, ScheduleTick
from pinledger.projections.verify import verify
from tests.contract.store_fixtures import PREFIX, scratch, store

__all__ = ["scratch", "store"]  # the fixtures, used by name

# Record times (the envelopes') and tick times far apart, so that a tick's `at` and its
# `tick_ms` cannot be mistaken for one another.
T0 = 1_700_000_000_000
TICK = 1_800_000_000_000
HOUR = 3_600_000
DUTY = Actor("pinledger:schedules", "", "host")


def _tick(queue: str, schedule: str, tick_ms: int, job: str = "") -> ScheduleTicked:
    return ScheduleTicked(queue, schedule, tick_ms, job)


# One record per line; the record at offset n is stamped T0 + n.
TICKS: tuple[tuple[Event, ...], ...] = (
    (
        QueueCreated("mail", 2),
        QueueCreated("old", 1),
        QueueCreated("calm", 1),
        QueueCreated("gone", 1),
    ),
    # Where the schedule began: no job.
    (_tick("mail", "hourly", TICK),),
    (_tick("mail", "hourly", TICK + HOUR, "mail:0:1"),),
    # An equal tick (a second catalog owner recording it again), then an earlier one.
    (_tick("mail", "hourly", TICK + HOUR, "mail:1:7"),),
    (_tick("mail", "hourly", TICK, "mail:0:2"),),
    # Two schedules of a queue, and another queue's, in one record.
    (_tick("mail", "daily", TICK + 24 * HOUR, "mail:1:3"), _tick("calm", "nightly", TICK, "c")),
    # Within one record: the later tick first, the earlier one changes nothing.
    (_tick("mail", "weekly", TICK + 10, "w2"), _tick("mail", "weekly", TICK + 5, "w1")),
    (_tick("nowhere", "hourly", TICK, "no such queue"),),
    (_tick("old", "o", TICK, "before its deletion"),),
    (QueueDeleted("old"), QueueCreated("old", 1)),
    (_tick("born", "b", TICK, "before its creation"), QueueCreated("born", 1)),
    (_tick("gone", "g", TICK, "deleted in the same record"), QueueDeleted("gone")),
    (QueueDeleted("calm"),),
    (_tick("calm", "nightly", TICK + HOUR, "after its deletion"),),
    (_tick("old", "o", TICK - HOUR, "the queue created again"),),
    (_tick("born", "b", TICK + 1, "after its creation"),),
)

EXPECTED = [
    ScheduleTick("born", "b", TICK + 1, "after its creation", T0 + 15),
    ScheduleTick("mail", "daily", TICK + 24 * HOUR, "mail:1:3", T0 + 5),
    ScheduleTick("mail", "hourly", TICK + HOUR, "mail:0:1", T0 + 2),
    ScheduleTick("mail", "weekly", TICK + 10, "w2", T0 + 6),
    ScheduleTick("old", "o", TICK - HOUR, "the queue created again", T0 + 14),
]


def _catalog(*records: tuple[Event, ...]) -> list[LogRecord]:
    topic = catalog_topic(PREFIX)
    return [
        LogRecord(topic, 0, offset, codec.encode(Envelope(T0 + offset, DUTY, events)), [])
        for offset, events in enumerate(records)
    ]


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_ticks_project_as_the_catalog_folds_them(store: LedgerStore, one_at_a_time: bool) -> None:
    records = _catalog(*TICKS)
    catalog = CatalogProjector(store, PREFIX)
    if one_at_a_time:
        for record in records:
            catalog.apply([record])
    else:
        catalog.apply(records)
    assert store.schedule_ticks() == ticks_of(codec.decode(r.value) for r in records)
    assert store.schedule_ticks() == EXPECTED
    assert store.schedule_ticks("mail") == EXPECTED[1:4]
    assert store.schedule_ticks("calm") == []
    assert store.schedule_ticks("nowhere") == []


def test_a_tick_rises_across_batches_and_a_deletion_drops_it(store: LedgerStore) -> None:
    catalog = CatalogProjector(store, PREFIX)
    records = _catalog(
        (QueueCreated("mail", 1),),
        (_tick("mail", "hourly", TICK, "a"),),
        (_tick("mail", "hourly", TICK + HOUR, "b"),),
        (_tick("mail", "hourly", TICK + HOUR, "equal"), _tick("mail", "hourly", TICK, "early")),
        (QueueDeleted("mail"),),
        (QueueCreated("mail", 1),),
    )
    seen = []
    for record in records:
        catalog.apply([record])
        seen.append([(t.tick_ms, t.job, t.at) for t in store.schedule_ticks("mail")])
    assert seen == [
        [],
        [(TICK, "a", T0 + 1)],
        [(TICK + HOUR, "b", T0 + 2)],
        [(TICK + HOUR, "b", T0 + 2)],
        [],
        [],
    ]


def test_a_replay_and_the_verify_agree_on_ticks(store: LedgerStore, scratch: LedgerStore) -> None:
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("mail", 1, T0, DUTY)
    writer.create_queue("calm", 1, T0, DUTY)
    writer.follow_format(formats.LATEST)
    writer.record_tick(_tick("mail", "hourly", TICK), T0 + 1, DUTY)
    writer.record_tick(_tick("mail", "hourly", TICK + HOUR, "mail:0:1"), T0 + 2, DUTY)
    writer.record_tick(_tick("mail", "hourly", TICK, "late and early"), T0 + 3, DUTY)
    writer.record_tick(_tick("calm", "nightly", TICK, "calm:0:1"), T0 + 4, DUTY)
    live = ProjectionRunner(store, log, PREFIX)
    try:
        live.catch_up()
    finally:
        live.close()
    expected = [
        ScheduleTick("calm", "nightly", TICK, "calm:0:1", T0 + 4),
        ScheduleTick("mail", "hourly", TICK + HOUR, "mail:0:1", T0 + 2),
    ]
    assert store.schedule_ticks() == expected
    if isinstance(store, FakeStore):  # a replay diffs two schemas of one database
        scratch = FakeStore("scratch", store.database)
    report = replay(store, scratch, log, PREFIX, Scope())
    assert report.identical, report.diffs
    assert "schedule_ticks" in [d.table for d in report.diffs]
    assert scratch.schedule_ticks() == expected
    verified = verify(store, log, PREFIX, Scope())
    assert verified.identical, verified.diffs
    assert "schedule_ticks" in [d.table for d in verified.diffs]
