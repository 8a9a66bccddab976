"""Periodic jobs' ticks in the catalog (decision 0038), on the fakes: the catalog
projection holds what the fold holds (projections/schedule_ticks.py) for any catalog,
however its records are split into batches; the replay and the verify find a store
whose ticks differ from the log's; the writer records a tick only on a cluster of
ledger format 3 and refuses one no store could project."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger import codec, formats
from pinledger.ledger.events import (
    Actor,
    Envelope,
    Event,
    FormatRaised,
    PartitionsRetired,
    Placement,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    RecordSkipped,
    ScheduleTicked,
)
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, LogRecord, catalog_topic
from pinledger.ledger.writer import MAX_SCHEDULE_NAME, LedgerWriter
from pinledger.projections.catalog_log import catalog_envelopes
from pinledger.projections.fake.store import FakeDatabase, FakeStore
from pinledger.projections.projector import CatalogProjector, ProjectionRunner, Scope
from pinledger.projections.replay import replay
from pinledger.projections.schedule_ticks import ticks_of
from pinledger.projections.store import QueueRow, ScheduleTick
from pinledger.projections.verify import verify

PREFIX = "t"
DUTY = Actor(source="pinledger:schedules")
GOLDEN = Path(__file__).parents[1] / "golden" / "v1-catalog-schedule-ticked.json"


def _project(envelopes: list[Envelope], records_per_batch: int) -> list[ScheduleTick]:
    """The catalog projected into a fake store, `records_per_batch` records a call."""
    store = FakeStore()
    projector = CatalogProjector(store, PREFIX)
    records = [
        LogRecord(catalog_topic(PREFIX), 0, i, codec.encode(e), []) for i, e in enumerate(envelopes)
    ]
    for start in range(0, len(records), records_per_batch):
        projector.apply(records[start : start + records_per_batch])
    return store.schedule_ticks()


@pytest.mark.parametrize("batch", [1, 2, 100])
def test_the_projection_holds_what_the_golden_records_fold_to(batch: int) -> None:
    document = json.loads(GOLDEN.read_text())
    envelopes = [codec.decode(r["value"].encode()) for r in document["records"]]
    expected = [ScheduleTick(*tick) for tick in document["expected"]["ticks"]]
    assert [(t.queue, t.schedule, t.job) for t in expected] == [
        ("born", "weekly", ""),
        ("mail", "daily", "mail:s1:p2:1024"),
        ("mail", "hourly", "mail:s0:p1:1024"),
    ]
    assert _project(envelopes, batch) == expected


_NAMES = st.sampled_from(["a", "b"])
_EVENTS: st.SearchStrategy[Event] = st.one_of(
    st.builds(QueueCreated, name=_NAMES, partitions=st.just(1)),
    st.builds(QueueDeleted, name=_NAMES),
    st.builds(
        ScheduleTicked,
        name=_NAMES,
        schedule=st.sampled_from(["x", "y"]),
        tick_ms=st.integers(0, 4),
        job=st.sampled_from(["", "j1", "j2"]),
    ),
)


@given(
    records=st.lists(st.lists(_EVENTS, min_size=1, max_size=4), max_size=12),
    batch=st.integers(1, 5),
)
def test_any_catalog_projects_to_the_ticks_it_folds_to(
    records: list[list[Event]], batch: int
) -> None:
    # A queue created when the catalog holds it already too: the store's creation and the
    # fold both start it with no tick.
    envelopes = [Envelope(i, DUTY, tuple(events)) for i, events in enumerate(records)]
    assert _project(envelopes, batch) == ticks_of(envelopes)


def test_the_fold_keeps_the_first_of_equal_ticks_and_the_latest_tick() -> None:
    envelopes = [
        Envelope(1, DUTY, (QueueCreated("mail", 1), ScheduleTicked("mail", "h", 10, "first"))),
        Envelope(2, DUTY, (ScheduleTicked("mail", "h", 10, "again"),)),
        Envelope(3, DUTY, (ScheduleTicked("mail", "h", 30, "later"),)),
        Envelope(4, DUTY, (ScheduleTicked("mail", "h", 20, "earlier"),)),
    ]
    assert ticks_of(envelopes[:2]) == [ScheduleTick("mail", "h", 10, "first", 1)]
    assert ticks_of(envelopes) == [ScheduleTick("mail", "h", 30, "later", 3)]


# -- the replay and the verify compare ticks ------------------------------------------


class TicklessStore(FakeStore):
    """A store whose catalog projection loses every tick: what the replay and the verify
    must find."""

    def commit_catalog(
        self,
        topic: str,
        expected_offset: int,
        next_offset: int,
        created: Sequence[tuple[QueueRow, Sequence[str]]],
        deleted: Sequence[tuple[str, str]],
        resized: Sequence[tuple[QueueRow, Sequence[str]]] = (),
        retired: Sequence[PartitionsRetired] = (),
        placed: Sequence[Placement] = (),
        skipped: Sequence[RecordSkipped] = (),
        paused: Sequence[QueuePaused] = (),
        ticks: Sequence[ScheduleTick] = (),
    ) -> None:
        super().commit_catalog(
            topic,
            expected_offset,
            next_offset,
            created,
            deleted,
            resized,
            retired,
            placed,
            skipped,
            paused,
        )


def test_the_replay_and_the_verify_find_ticks_the_store_lacks() -> None:
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("mail", 1, 1, DUTY)
    writer.follow_format(formats.LATEST)
    writer.record_tick(ScheduleTicked("mail", "hourly", 3_600_000, "mail:0:1"), 2, DUTY)
    database = FakeDatabase()
    live = TicklessStore("live", database)
    live.migrate()
    runner = ProjectionRunner(live, log, PREFIX)
    try:
        runner.catch_up()
    finally:
        runner.close()
    assert live.schedule_ticks() == []
    expected = {"queue": "mail", "schedule": "hourly", "tick_ms": 3_600_000, "job": "mail:0:1"}

    replayed = replay(live, FakeStore("scratch", database), log, PREFIX, Scope())
    ticks = next(d for d in replayed.diffs if d.table == "schedule_ticks")
    assert (ticks.only_live, ticks.only_replay) == (0, 1)
    # The fake's samples are the rows' columns, as text.
    assert ticks.replay_samples[0] == repr(sorted({**expected, "at_ms": 2}.items()))
    assert not replayed.identical

    verified = verify(live, log, PREFIX, Scope())
    ticks = next(d for d in verified.diffs if d.table == "schedule_ticks")
    assert (ticks.only_live, ticks.only_replay) == (0, 1)
    assert ticks.replay_samples[0] == {**expected, "at": 2}
    assert not verified.identical
    # Out of its scope, the queue's ticks are not compared.
    assert verify(live, log, PREFIX, Scope(queues=frozenset({"other"}))).identical


# -- the writer -------------------------------------------------------------------------


def _log(cluster_format: int) -> FakeLog:
    """A catalog at `cluster_format` with queue "mail" (written as a release of that
    format wrote it: its first record says the format)."""
    log = FakeLog()
    log.create_topic(catalog_topic(PREFIX), 1)
    created = Envelope(0, DUTY, (FormatRaised(cluster_format), QueueCreated("mail", 1)))
    log.append([Append(catalog_topic(PREFIX), 0, codec.encode(created))])
    return log


def _ticks_in(log: FakeLog) -> list[ScheduleTicked]:
    return [
        e for v in catalog_envelopes(log, PREFIX) for e in v.events if isinstance(e, ScheduleTicked)
    ]


@pytest.mark.parametrize("cluster_format", [formats.PLAIN, formats.GROUPED])
def test_a_cluster_below_format_3_refuses_a_tick(cluster_format: int) -> None:
    log = _log(cluster_format)
    writer = LedgerWriter(log, PREFIX)
    writer.follow_format(cluster_format)
    with pytest.raises(formats.FormatTooOldError, match="recording a periodic job's tick"):
        writer.record_tick(ScheduleTicked("mail", "hourly", 5, "mail:0:1"), 5, DUTY)
    assert _ticks_in(log) == []


def test_a_cluster_of_format_3_records_a_tick() -> None:
    log = _log(formats.SCHEDULES)
    writer = LedgerWriter(log, PREFIX)
    writer.follow_format(formats.SCHEDULES)
    writer.record_tick(ScheduleTicked("mail", "hourly", 5, "mail:0:1"), 6, DUTY)
    assert _ticks_in(log) == [ScheduleTicked("mail", "hourly", 5, "mail:0:1")]


@pytest.mark.parametrize(
    "tick",
    [
        ScheduleTicked("mail", "", 5),
        ScheduleTicked("mail", "h" * (MAX_SCHEDULE_NAME + 1), 5),
        ScheduleTicked("mail", "a\x00b", 5),
        ScheduleTicked("mail", "hourly", 5, "mail:0:1\x00"),
    ],
)
def test_the_writer_refuses_a_tick_no_store_could_project(tick: ScheduleTicked) -> None:
    log = _log(formats.LATEST)
    writer = LedgerWriter(log, PREFIX)
    writer.follow_format(formats.LATEST)
    with pytest.raises(ValueError, match=r"schedule name|job descriptor"):
        writer.record_tick(tick, 6, DUTY)
    assert _ticks_in(log) == []
    # The longest name a store holds is recorded.
    writer.record_tick(ScheduleTicked("mail", "h" * MAX_SCHEDULE_NAME, 5), 7, DUTY)
    assert len(_ticks_in(log)) == 1
