"""The history lifecycle: which day partitions a retention drops, the maintenance that
makes them ahead and drops them, and a job's history read back from the log once its
timeline rows are gone (the same history the rows gave)."""

from __future__ import annotations

import pytest

from pinledger.ledger import codec
from pinledger.ledger.descriptor import JobDescriptor, local_id_for
from pinledger.ledger.events import (
    Actor,
    Claimed,
    Collected,
    Enqueued,
    Envelope,
    Event,
    Failed,
    Succeeded,
)
from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, LogError, Position
from pinledger.projections.day_partitions import (
    DAY_MS,
    DayPartition,
    ahead_of,
    day_partition,
    day_start,
    partition_name,
    partitions_between,
    retention_cutoff,
    to_drop,
)
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.history import build_history
from pinledger.projections.log_history import (
    HistoryScanLimitError,
    has_enqueue,
    job_rows,
    read_history,
)
from pinledger.projections.projector import PartitionProjector
from pinledger.service.ownership.maintenance.scheduler import Lane
from pinledger.service.ownership.maintenance.timeline_retention import TimelineRetention

DAY0 = day_start(1_700_000_000_000)  # 2023-11-14 00:00 UTC
TOPIC = "t.q.mail"
W = Actor("svc:worker", "r1", "s1")
OWNER = Actor("pinledger:owner", "r2", "s2")


def _day(n: int) -> DayPartition:
    return DayPartition(DAY0 + n * DAY_MS, DAY0 + (n + 1) * DAY_MS)


# -- which partitions -----------------------------------------------------------------


def test_an_event_belongs_to_the_utc_day_it_happened_in() -> None:
    assert day_partition(DAY0) == _day(0)
    assert day_partition(DAY0 + DAY_MS - 1) == _day(0)
    assert day_partition(DAY0 + DAY_MS) == _day(1)
    assert day_partition(-1) == DayPartition(-DAY_MS, 0)
    assert partition_name(DAY0) == "job_events_p20231114"
    assert partition_name(0) == "job_events_p19700101"


def test_the_partitions_between_two_times_cover_both_ends() -> None:
    assert partitions_between(DAY0 + 5, DAY0 + 5) == []
    assert partitions_between(DAY0 + 5, DAY0 + 6) == [_day(0)]
    assert partitions_between(DAY0, DAY0 + DAY_MS) == [_day(0)]
    assert partitions_between(DAY0, DAY0 + DAY_MS + 1) == [_day(0), _day(1)]
    assert partitions_between(*ahead_of(DAY0 + 123, days=2)) == [_day(0), _day(1), _day(2)]


def test_a_retention_of_zero_keeps_everything() -> None:
    assert retention_cutoff(DAY0, 0) is None
    assert retention_cutoff(DAY0 + 10 * DAY_MS, 3) == DAY0 + 7 * DAY_MS
    assert retention_cutoff(DAY0 + DAY_MS, 0.5) == DAY0 + DAY_MS // 2


def test_only_partitions_wholly_older_than_the_cutoff_are_dropped() -> None:
    parts = [_day(2), _day(0), _day(1)]
    # A partition whose end is the cut-off holds only older events: it goes.
    assert to_drop(parts, DAY0 + DAY_MS) == [_day(0)]
    # One that still holds an event at or after the cut-off stays.
    assert to_drop(parts, DAY0 + DAY_MS - 1) == []
    assert to_drop(parts, DAY0 + 2 * DAY_MS + 1) == [_day(0), _day(1)]
    assert to_drop(parts, DAY0 + 99 * DAY_MS) == [_day(0), _day(1), _day(2)]
    assert to_drop([], DAY0) == []


# -- the maintenance ------------------------------------------------------------------


def test_the_keeper_makes_partitions_ahead_and_keeps_history_forever_by_default() -> None:
    store, clock = FakeStore(), FakeClock(DAY0 + 1000)
    keeper = TimelineRetention(store, retention_days=0)
    assert keeper.run(clock.now_ms()).created == 3
    clock.advance(30 * 86_400)
    result = keeper.run(clock.now_ms())
    assert (result.created, result.dropped) == (3, 0)
    assert store.day_partitions()[0] == _day(0)


def test_the_keeper_drops_the_days_past_the_retention() -> None:
    store, clock = FakeStore(), FakeClock(DAY0 + 1000)
    keeper = TimelineRetention(store, retention_days=2)
    keeper.run(clock.now_ms())  # days 0, 1, 2
    clock.advance(3 * 86_400)  # day 3, 00:00:01: days 0 (ended 3 days ago) is past 2 days
    assert keeper.run(clock.now_ms()).dropped == 1
    assert store.day_partitions()[0] == _day(1)


def test_the_retention_survives_failures_and_backs_off() -> None:
    """It runs at once, sooner after a failure (1 s, doubling up to its interval), and
    at its interval once it works again."""
    store, clock = FakeStore(), FakeClock(DAY0)
    lane = Lane("timeline-retention", [TimelineRetention(store, 1, every_s=60)], clock, bool, "t")
    assert lane.until_next() == 0
    store.fail("connection refused")
    pauses = []
    for _ in range(8):
        lane.run_due()
        pauses.append(lane.until_next())
        clock.advance(pauses[-1])
    assert pauses == [1, 2, 4, 8, 16, 32, 60, 60]
    assert lane.health["timeline-retention"].failures_in_a_row == 8
    store.recover()
    lane.run_due()
    assert lane.health["timeline-retention"].failure is None
    assert lane.until_next() == 60
    clock.advance(60)
    store.fail("connection refused")
    lane.run_due()
    assert lane.until_next() == 1


# -- a history read from the log --------------------------------------------------------


class _Ledger:
    """One partition of a queue: records appended to a FakeLog and projected into a
    FakeStore, as an owner does."""

    def __init__(self) -> None:
        self.log = FakeLog()
        self.log.create_topic(TOPIC, 1)
        self.store = FakeStore()
        self.store.migrate()
        self.store.start_offset(TOPIC, 0)  # as the queue's creation would
        self.projector = PartitionProjector(self.store, "mail", TOPIC, 0)

    def append(self, at: int, actor: Actor, *events: Event) -> int:
        value = codec.encode(Envelope(at, actor, events))
        headers = codec.trace_headers("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        [offset] = self.log.append([Append(TOPIC, 0, value, headers)])
        return offset

    def project(self) -> None:
        reader = self.log.reader([Position(TOPIC, 0, self.projector.next_offset)])
        while batch := reader.poll(1000, 0):
            self.projector.apply(batch)
        reader.close()


def _enqueue() -> Enqueued:
    return Enqueued(body=b"payload", priority=1, run_after=0, attempts_allowed=2)


def _two_day_job(ledger: _Ledger) -> JobDescriptor:
    """A job enqueued on day 0 among others, failed once on day 1, done on day 2 and
    collected on day 3; events of other jobs around it."""
    offset = ledger.append(DAY0 + 10, W, _enqueue(), _enqueue())
    job = JobDescriptor("mail", 0, 1, local_id_for(offset, 1))
    other = local_id_for(offset, 0)
    ledger.append(DAY0 + DAY_MS + 1, W, Claimed(job.local_id, "c1"), Claimed(other, "c9"))
    ledger.append(DAY0 + DAY_MS + 2, W, Failed(job.local_id, 5, " boom"))
    ledger.append(DAY0 + DAY_MS + 3, W, Succeeded(job.local_id, " late ack, rejected"))
    ledger.append(DAY0 + 2 * DAY_MS, W, Claimed(job.local_id, "c2"))
    ledger.append(DAY0 + 2 * DAY_MS + 9, W, Succeeded(job.local_id, " done"))
    ledger.append(DAY0 + 3 * DAY_MS, OWNER, Collected(job.local_id))
    ledger.append(DAY0 + 3 * DAY_MS + 1, W, _enqueue())
    ledger.project()
    return job


def test_the_history_read_from_the_log_is_the_one_the_rows_gave() -> None:
    ledger = _Ledger()
    job = _two_day_job(ledger)
    rows = ledger.store.job_events("mail", 0, job.local_id)
    assert has_enqueue(job, rows)
    before = build_history(job, rows)
    assert [s.action for s in before.steps][-1] == "Collected"

    assert ledger.store.drop_day_partitions_before(DAY0 + 2 * DAY_MS) == 2  # days 0 and 1
    partial = ledger.store.job_events("mail", 0, job.local_id)
    assert len(partial) < len(rows) and not has_enqueue(job, partial)

    from_log = job_rows(partial, ledger.log, TOPIC, job, max_records=100)
    assert from_log == rows
    assert build_history(job, from_log) == before
    # As of an offset too.
    at = rows[2].offset
    assert build_history(job, from_log, at) == build_history(job, rows, at)


def test_rows_that_hold_the_enqueue_are_not_read_from_the_log() -> None:
    ledger = _Ledger()
    job = _two_day_job(ledger)
    rows = ledger.store.job_events("mail", 0, job.local_id)
    ledger.log.fail("broker down")  # reading the log would raise
    assert job_rows(rows, ledger.log, TOPIC, job, max_records=100) == rows


def test_the_log_is_read_up_to_the_jobs_collection_only() -> None:
    ledger = _Ledger()
    job = _two_day_job(ledger)
    scan = read_history(ledger.log, TOPIC, job, max_records=100)
    assert scan.records == 7  # the enqueue .. the collection, not the record after
    assert scan.rows[-1].type == "gc"


def test_a_job_that_never_existed_has_no_history_from_the_log() -> None:
    ledger = _Ledger()
    job = _two_day_job(ledger)
    never = JobDescriptor("mail", 0, 1, local_id_for(job.offset, 7))
    assert read_history(ledger.log, TOPIC, never, max_records=100).rows == []
    beyond = JobDescriptor("mail", 0, 1, local_id_for(999, 0))
    assert read_history(ledger.log, TOPIC, beyond, max_records=100).rows == []
    assert job_rows([], ledger.log, TOPIC, never, max_records=100) == []


def test_a_job_still_running_is_read_to_the_partitions_end() -> None:
    ledger = _Ledger()
    offset = ledger.append(DAY0, W, _enqueue())
    job = JobDescriptor("mail", 0, 1, local_id_for(offset, 0))
    ledger.append(DAY0 + 1, W, Claimed(job.local_id, "c1"))
    ledger.project()
    rows = read_history(ledger.log, TOPIC, job, max_records=100).rows
    assert [r.type for r in rows] == ["enq", "clm"]
    assert rows == ledger.store.job_events("mail", 0, job.local_id)


def test_reading_the_log_stops_at_its_bound_with_a_message() -> None:
    ledger = _Ledger()
    job = _two_day_job(ledger)
    with pytest.raises(HistoryScanLimitError, match=r"stopped after 3 records.*HISTORY_SCAN"):
        read_history(ledger.log, TOPIC, job, max_records=3)


def test_an_unreadable_log_is_a_log_error() -> None:
    ledger = _Ledger()
    job = _two_day_job(ledger)
    ledger.log.fail("broker down")
    with pytest.raises(LogError):
        job_rows([], ledger.log, TOPIC, job, max_records=100)


def test_the_history_read_from_the_log_passes_over_a_skipped_record() -> None:
    """A record an operator skipped (decision 0032), which the projection passed over:
    the job's history read from the log passes over it too, even one no release can
    decode, and says what the projection applied."""
    ledger = _Ledger()
    offset = ledger.append(DAY0, W, _enqueue())
    job = JobDescriptor("mail", 0, 1, local_id_for(offset, 0))
    [bad] = ledger.log.append([Append(TOPIC, 0, b"\x00not a record")])
    ledger.append(DAY0 + 1, W, Claimed(job.local_id, "c1"))
    ledger.projector.skips[bad] = "garbage"
    ledger.project()
    rows = ledger.store.job_events("mail", 0, job.local_id)
    assert read_history(ledger.log, TOPIC, job, 100, skipped={bad}).rows == rows
    assert job_rows([], ledger.log, TOPIC, job, 100, lambda: {bad: "garbage"}) == rows
    with pytest.raises(codec.CodecError):
        read_history(ledger.log, TOPIC, job, 100)
