"""A log with a skipped record (decision 0032) replays as the live projection has it, on
the fakes: a rebuild into a scratch schema (whose catalog projection reaches the skip
after the partition reaches the record: the runner reads the skips first), a bounded
replay (an as-of view), and the verify's fold all pass over the record."""

from __future__ import annotations

from pinledger.ledger import formats
from pinledger.ledger.events import Actor, Enqueued, RecordSkipped
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, queue_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeDatabase, FakeStore
from pinledger.projections.projector import Bound, ProjectionRunner, Scope
from pinledger.projections.replay import replay
from pinledger.projections.verify import verify

ADMIN = Actor(source="test:admin", request_id="", server="test")
PREFIX = "t."


def _log() -> tuple[FakeLog, int]:
    """Queue "q" of one partition: a job, a record no release decodes, a job; the
    catalog's skip of the record last. Returns the log and the record's offset."""
    log = FakeLog()
    writer = LedgerWriter(log, PREFIX)
    writer.create_queue("q", 1, 0, ADMIN)
    writer.append("q", 0, [Enqueued(b"before", 1, 0, 1)], 1, ADMIN)
    [bad] = log.append([Append(queue_topic(PREFIX, "q"), 0, b"\x00garbage")])
    writer.append("q", 0, [Enqueued(b"after", 1, 0, 1)], 2, ADMIN)
    writer.follow_format(formats.LATEST)
    writer.skip_record(RecordSkipped("q", 0, bad, "garbage"), 3, ADMIN)
    return log, bad


def _projected(
    store: FakeStore, log: FakeLog, scope: Scope | None = None, max_records: int = 5000
) -> int:
    store.migrate()
    runner = ProjectionRunner(store, log, PREFIX, scope, max_records)
    try:
        return runner.catch_up()
    finally:
        runner.close()


def test_a_replay_passes_over_a_skipped_record_reached_before_its_skip() -> None:
    log, bad = _log()
    database = FakeDatabase()
    live = FakeStore("live", database)
    # Two records per poll: the queue's partition is projected from the second poll on,
    # and reaches the record before the catalog projection reaches the skip.
    assert _projected(live, log, max_records=2) == 2
    topic = queue_topic(PREFIX, "q")
    assert live.offsets([(topic, 0)]) == {(topic, 0): bad + 2}
    assert {job.body for job in live.partition_jobs("q", 0).values()} == {b"before", b"after"}
    assert live.skipped_records("q", 0) == {bad: "garbage"}

    report = replay(live, FakeStore("scratch", database), log, PREFIX, Scope())
    assert report.identical, report.diffs
    assert "skipped_records" in [d.table for d in report.diffs]
    assert verify(live, log, PREFIX, Scope()).identical

    # Bounded just past the record (an as-of view): the record is passed over too.
    as_of = FakeStore("as_of", database)
    assert _projected(as_of, log, Scope(bound=Bound(offset=bad + 1))) == 1
    assert as_of.offsets([(topic, 0)]) == {(topic, 0): bad + 1}
