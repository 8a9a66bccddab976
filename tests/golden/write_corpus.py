"""Writes the golden corpus of ledger records (tests/golden/*.json) and its checksums
(tests/golden/SHA256SUMS). tests/unit/test_golden_corpus.py decodes and folds every
file on every change, and fails if a file already in the corpus changed.

Each file holds the exact bytes of records as pinledger writes them, with what they
decode and fold to as the release that wrote them folded them. A file is written once
and never again: this script only adds the files it does not find. A new record form
(a new event, a new field, a new format version) adds a story here and a file to the
corpus; an old file stays as it is, forever, because the log keeps its records forever.

    python tests/golden/write_corpus.py

The forms here, and since when pinledger writes them (git log -- ledger/codec.py):
plain records of every event type with every field (a45139f), an enqueue of an imported
job (`"i"`, 58ce852), group records whose envelopes carry their trace context (`"tp"`,
0f5dff3); the trace context of a plain record in its `traceparent` header (a45139f);
the catalog's record of the cluster's ledger format (`"fmt"`, ledger format 2, decision
0025); a queue resized live (`"qsize"`, ledger format 2, decision 0030); a queue's drained
partitions retired (`"qret"`, ledger format 2, decision 0030); partitions placed on store
shards (`"qplace"`, ledger format 2, decision 0031); a partition moved to another shard
(`"qmove"`, ledger format 2, decision 0031); a delete guarded by the state its job was
selected in (`"del"` with `"s"`, ledger format 3, decision 0032); a queue record skipped by
an operator (`"qskip"`, ledger format 3, decision 0032); a queue paused or resumed
(`"qpause"`, ledger format 3, decision 0035); enqueues of unique jobs (`"k"` and `"kf"`,
ledger format 3, decision 0037); jobs cancelled by an operator (`"cncl"`, ledger format
3, decision 0036); periodic jobs' ticks (`"stick"`, ledger format 3, decision 0038).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import local_id_for
from pinledger.ledger.events import (
    Actor,
    Cancelled,
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Envelope,
    Event,
    Failed,
    FormatRaised,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    QueueResized,
    RecordSkipped,
    Retried,
    ScheduleTicked,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.log import LogRecord
from pinledger.ledger.state import Job
from pinledger.projections.catalog_log import catalog_queues
from pinledger.projections.row_text import EVENT_COLUMNS, columns, leading_ints
from pinledger.projections.schedule_ticks import ticks_of
from pinledger.projections.skips import Skips, skips_of
from pinledger.projections.verify_fold import IdRange, PartitionFold

HERE = Path(__file__).parent
SUMS = HERE / "SHA256SUMS"
FORMAT = "pinledger ledger records, codec version 1"

T0 = 1_700_000_000_000
APP = Actor("mail-service:host-1", "req-1", "pinledger-a")
WORKER = Actor("thumbnailer:host-7", "req-2", "pinledger-a")
OTHER = Actor("thumbnailer:host-9", "req-3", "pinledger-b")
OWNER = Actor("pinledger:owner", "", "pinledger-a")
OPERATOR = Actor("dashboard:alice", "req-4", "pinledger-b")
TP1 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TP2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@dataclass
class Story:
    """One partition's records, appended in order from offset 0."""

    name: str
    about: str
    topic: str = "queue"
    records: list[tuple[bytes, codec.Headers]] = field(default_factory=list)

    def plain(self, at: int, actor: Actor, *events: Event, traceparent: str | None = None) -> int:
        """A record of one envelope (its trace context in a header); its offset."""
        value = codec.encode(Envelope(at, actor, tuple(events)))
        self.records.append((value, codec.trace_headers(traceparent)))
        return len(self.records) - 1

    def group(self, *parts: tuple[int, Actor, tuple[Event, ...], str | None]) -> int:
        """A group record: several callers' envelopes, each with its trace context."""
        value = codec.encode_group(
            [codec.encode_part(Envelope(at, actor, events), tp) for at, actor, events, tp in parts]
        )
        self.records.append((value, []))
        return len(self.records) - 1


def lifecycle() -> Story:
    s = Story(
        "v1-plain-every-event",
        "Plain records of every job event type with every field: enqueues (one of an "
        "imported job), claims, acks with and without a claim, a retry delay, heartbeats "
        "and a release, a claim timeout, an operator's retry, a delete and a collection; "
        "and events the state machine rejects (a stale ack, a late timeout).",
    )
    enq = s.plain(
        T0,
        APP,
        Enqueued(b"resize 1.jpg", 1, T0, 3, "new"),
        Enqueued(b"resize 2.jpg", 2, T0 + 50, 1, ""),
        Enqueued(b"\x00\xffraw", 3, T0, 2, "", imported_from="mail:s1:p3:42"),
        Enqueued(b"last try", 1, T0, 1, "\u00e9t\u00e9 \u2603"),
        traceparent=TP1,
    )
    a, b, c, d = (local_id_for(enq, i) for i in range(4))
    first_claim = "pinledger-a:1:thumbnailer:1"
    s.plain(
        T0 + 10,
        WORKER,
        Claimed(a, first_claim),
        Claimed(c, first_claim),
        Claimed(d, first_claim),
    )
    s.plain(T0 + 20, WORKER, Succeeded(a, " done", first_claim))
    s.plain(T0 + 25, WORKER, Failed(d, 0, " gave up", first_claim))
    # PinLater's acks carry no claim: fenced by the claim's source.
    s.plain(T0 + 30, WORKER, Failed(c, 500, " oops", None))
    second_claim = "pinledger-b:2:thumbnailer:1"
    s.plain(T0 + 60, OTHER, Claimed(b, second_claim))
    s.plain(
        T0 + 70,
        OTHER,
        Checkpointed(b, b"resize 2b.jpg", False, None, 4, "step 1; ", second_claim),
    )
    s.plain(T0 + 80, WORKER, Succeeded(b, "stale", first_claim))
    s.plain(
        T0 + 90,
        OTHER,
        Checkpointed(b, None, True, T0 + 5000, None, None, second_claim),
    )
    s.plain(T0 + 600, WORKER, Claimed(c, "pinledger-a:3:thumbnailer:2"))
    s.plain(T0 + 700, OWNER, TimedOut(c, "pinledger-a:3:thumbnailer:2", T0 + 600))
    s.plain(T0 + 800, OWNER, TimedOut(c, "pinledger-a:3:thumbnailer:2", T0 + 600))
    s.plain(T0 + 900, OPERATOR, Retried(c, 5, T0 + 1000))
    s.plain(T0 + 950, OPERATOR, Deleted(b))
    s.plain(T0 + 990, OWNER, Collected(a))
    s.plain(T0 + 995, OWNER, Collected(c))
    return s


def group_records() -> Story:
    s = Story(
        "v1-group-records",
        "Group records (ledger/group_commit.py): the envelopes of concurrent callers to "
        "one partition in one record, each with its own time, actor and trace context "
        '("tp"), or none; an enqueued job\'s local id counts the events of the parts '
        "before it. A group of one caller is a plain record with a header.",
    )
    first = s.group(
        (T0, APP, (Enqueued(b"one", 5, T0, 2, "a"), Enqueued(b"two", 5, T0, 2, "b")), TP1),
        (T0 + 1, OTHER, (Enqueued(b"three", 1, T0 + 100, 1, ""),), None),
        (T0 + 2, WORKER, (Enqueued(b"four", 1, T0, 1, "d"),), TP2),
    )
    one, two, three, four = (local_id_for(first, i) for i in range(4))
    claims = (Claimed(one, "pinledger-a:7:w:1"), Claimed(two, "pinledger-a:7:w:1"))
    s.group(
        (T0 + 10, WORKER, claims, TP2),
        (T0 + 11, OTHER, (Claimed(four, "pinledger-a:8:w:1"),), None),
    )
    s.group(
        (T0 + 20, WORKER, (Succeeded(one, "", "pinledger-a:7:w:1"),), None),
        (T0 + 21, WORKER, (Failed(two, 0, "x", "pinledger-a:7:w:1"),), TP1),
        (T0 + 22, OTHER, (Claimed(three, "pinledger-a:9:w:1"),), None),
    )
    s.plain(T0 + 30, OTHER, Succeeded(four, "ok", "pinledger-a:8:w:1"), traceparent=TP2)
    return s


def catalog() -> Story:
    s = Story(
        "v1-catalog",
        "Catalog records: queues created (with their partitions) and deleted.",
        topic="catalog",
    )
    s.plain(T0, OPERATOR, QueueCreated("mail", 4))
    s.plain(T0 + 1, OPERATOR, QueueCreated("fifo", 1), QueueDeleted("mail"))
    s.plain(T0 + 2, OPERATOR, QueueCreated("mail", 8))
    return s


def format_records() -> Story:
    s = Story(
        "v1-catalog-ledger-format",
        "Catalog records of ledger format 2: a new catalog's format, a queue, a raise.",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(2))
    s.plain(T0 + 1, OPERATOR, QueueCreated("mail", 4))
    s.plain(T0 + 2, OPERATOR, FormatRaised(1))  # lower than the format: changes nothing
    return s


def queue_resized() -> Story:
    s = Story(
        "v1-catalog-queue-resized",
        "Catalog records of ledger format 2: a queue grown live twice (decision 0030), a "
        "resize of a queue that does not exist.",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(2))
    s.plain(T0 + 1, OPERATOR, QueueCreated("mail", 2))
    s.plain(T0 + 2, OPERATOR, QueueResized("mail", 6, "pinledger queue resize, by ops@host"))
    s.plain(T0 + 3, OWNER, QueueResized("mail", 8, "queue config"), QueueResized("gone", 3, ""))
    return s


def partitions_retired() -> Story:
    s = Story(
        "v1-catalog-partitions-retired",
        "Catalog records of ledger format 2: a queue shrunk, its drained partitions retired, "
        "a retirement undone, and partitions reopened by a resize (decision 0030).",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(2))
    s.plain(T0 + 1, OPERATOR, QueueCreated("mail", 6))
    s.plain(T0 + 2, OPERATOR, QueueResized("mail", 2, "pinledger queue resize, by ops@host"))
    s.plain(T0 + 3, OWNER, PartitionsRetired("mail", 2, "partitions 2..5 drained"))
    s.plain(T0 + 4, OWNER, PartitionsRetired("mail", 6, "a job in a retired partition"))
    s.plain(T0 + 5, OWNER, QueueResized("mail", 4, "queue config"))
    return s


def partitions_placed() -> Story:
    s = Story(
        "v1-catalog-partitions-placed",
        "Catalog records of ledger format 2: a queue created with its partitions placed on "
        "two store shards, grown with its new partitions placed, a second placement of a "
        "partition (ignored: the first stands), and a queue deleted and created again "
        "with placements of its own (decision 0031).",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(2))
    s.plain(
        T0 + 1,
        OPERATOR,
        QueueCreated("mail", 2),
        PartitionPlaced("mail", 0, "a", "queue created"),
        PartitionPlaced("mail", 1, "b", "queue created"),
    )
    s.plain(
        T0 + 2,
        OPERATOR,
        QueueResized("mail", 3, "queue config"),
        PartitionPlaced("mail", 2, "a", "queue resized"),
    )
    s.plain(T0 + 3, OPERATOR, PartitionPlaced("mail", 2, "b", "queue resized"))
    s.plain(T0 + 4, OPERATOR, QueueDeleted("mail"))
    s.plain(
        T0 + 5,
        OPERATOR,
        QueueCreated("mail", 1),
        PartitionPlaced("mail", 0, "b", "queue created"),
    )
    return s


def partition_moved() -> Story:
    s = Story(
        "v1-catalog-partition-moved",
        "Catalog records of ledger format 2: a partition placed on shard a moved to b once b "
        "held its projection up to offset 1200, a second move naming a (ignored: it is on "
        "b now), and an unplaced partition (on the home shard) moved to b (decision 0031).",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(2))
    s.plain(
        T0 + 1,
        OPERATOR,
        QueueCreated("mail", 2),
        PartitionPlaced("mail", 0, "a", "queue created"),
    )
    s.plain(T0 + 2, OPERATOR, PartitionMoved("mail", 0, "a", "b", 1200))
    s.plain(T0 + 3, OPERATOR, PartitionMoved("mail", 0, "a", "c", 1300))
    s.plain(T0 + 4, OPERATOR, PartitionMoved("mail", 1, "", "b", 0))
    return s


def guarded_deletes() -> Story:
    s = Story(
        "v1-guarded-deletes",
        "Job records of ledger format 3: deletes that name the state their job was "
        "selected in (decision 0032). One applies (still FAILED); one is rejected because "
        "a retry made the job PENDING after deleteJobs(FAILED) selected it; one is "
        "rejected because a claim made the job IN_PROGRESS after deleteJobs(PENDING) "
        "selected it; an unguarded delete (formats 1 and 2) still applies in any state.",
    )
    enq = s.plain(
        T0,
        APP,
        Enqueued(b"a", 1, T0, 1, ""),
        Enqueued(b"b", 1, T0, 1, ""),
        Enqueued(b"c", 1, T0, 1, ""),
        Enqueued(b"d", 1, T0, 1, ""),
    )
    a, b, c, d = (local_id_for(enq, i) for i in range(4))
    claim = "pinledger-a:1:thumbnailer:1"
    s.plain(T0 + 10, WORKER, Claimed(a, claim), Claimed(b, claim), Claimed(d, claim))
    s.plain(T0 + 20, WORKER, Failed(a, 0, "", claim), Failed(b, 0, "", claim))
    s.plain(T0 + 30, OPERATOR, Retried(b, 2, T0 + 30))
    s.plain(T0 + 40, WORKER, Claimed(c, "pinledger-a:1:thumbnailer:2"))
    s.plain(
        T0 + 50,
        OPERATOR,
        Deleted(a, state=3),
        Deleted(b, state=3),
        Deleted(c, state=0),
        Deleted(d),
    )
    return s


def cancelled_jobs() -> Story:
    s = Story(
        "v1-cancelled-jobs",
        "Job records of ledger format 3: jobs cancelled by an operator (decision 0036). A "
        "PENDING job and a running one end FAILED with no attempts left and the cancel "
        "prepended to their status; the running job's late ack is rejected; a cancel "
        "of a SUCCEEDED job is rejected; a cancel without a reason says only who.",
    )
    enq = s.plain(
        T0,
        APP,
        Enqueued(b"a", 1, T0, 3, "queued"),
        Enqueued(b"b", 1, T0, 3, ""),
        Enqueued(b"c", 1, T0, 1, ""),
        Enqueued(b"d", 1, T0, 1, ""),
    )
    a, b, c, d = (local_id_for(enq, i) for i in range(4))
    claim = "pinledger-a:1:thumbnailer:1"
    s.plain(T0 + 10, WORKER, Claimed(b, claim), Claimed(c, claim))
    s.plain(T0 + 20, WORKER, Succeeded(c, " done", claim))
    s.plain(T0 + 30, OPERATOR, Cancelled(a, "wrong body"), Cancelled(b, "stuck"), Cancelled(c, "x"))
    s.plain(T0 + 40, WORKER, Succeeded(b, " done", claim))
    s.plain(T0 + 50, OPERATOR, Cancelled(d))
    return s


def record_skipped() -> Story:
    s = Story(
        "v1-catalog-record-skipped",
        "Catalog records of ledger format 3: records of a queue's partitions skipped by "
        "`pinledger skip-record` (decision 0032): one no store commits, one no release "
        "decodes, a second skip of the first (the first stands), one of a partition the "
        "queue lacks and one of a queue that does not exist (neither holds), and a queue "
        "deleted and created again (its skips go with it: its new topic starts at 0).",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(3))
    s.plain(T0 + 1, OPERATOR, QueueCreated("mail", 2), QueueCreated("old", 1))
    s.plain(
        T0 + 2,
        OPERATOR,
        RecordSkipped("mail", 1, 42, "its custom status holds a NUL, which Postgres refuses"),
    )
    s.plain(T0 + 3, OPERATOR, RecordSkipped("mail", 0, 7, ""))
    s.plain(T0 + 4, OPERATOR, RecordSkipped("mail", 1, 42, "again"))
    s.plain(T0 + 5, OPERATOR, RecordSkipped("mail", 2, 1, "no such partition"))
    s.plain(T0 + 6, OPERATOR, RecordSkipped("gone", 0, 3, "no such queue"))
    s.plain(T0 + 7, OPERATOR, RecordSkipped("old", 0, 3, "written by a newer release"))
    s.plain(T0 + 8, OPERATOR, QueueDeleted("old"), QueueCreated("old", 1))
    return s


def queue_paused() -> Story:
    s = Story(
        "v1-catalog-queue-paused",
        "Catalog records of ledger format 3: queues paused and resumed by `pinledger queue "
        "pause|resume` or the dashboard (decision 0035): a pause with a reason, a second "
        "pause (no change), a resume, a pause of a queue that does not exist (it holds for "
        "none), a queue paused then deleted and created again (it starts unpaused), and a "
        "queue paused in the record that creates it.",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(3))
    s.plain(T0 + 1, OPERATOR, QueueCreated("mail", 2), QueueCreated("old", 1))
    s.plain(T0 + 2, OPERATOR, QueuePaused("mail", True, "the mail provider is down"))
    s.plain(T0 + 3, OPERATOR, QueuePaused("mail", True, "again"))
    s.plain(T0 + 4, OPERATOR, QueuePaused("mail", False, ""))
    s.plain(T0 + 5, OPERATOR, QueuePaused("gone", True, "no such queue"))
    s.plain(T0 + 6, OPERATOR, QueuePaused("old", True, "before its deletion"))
    s.plain(T0 + 7, OPERATOR, QueueDeleted("old"), QueueCreated("old", 1))
    s.plain(T0 + 8, OPERATOR, QueueCreated("held", 1), QueuePaused("held", True, "at birth"))
    return s


def schedule_ticked() -> Story:
    tick, hour = 1_800_000_000_000, 3_600_000
    s = Story(
        "v1-catalog-schedule-ticked",
        "Catalog records of ledger format 3: periodic jobs' ticks recorded by the catalog "
        "owner's schedules duty (decision 0038): where a schedule began (no job), a tick "
        "and its job, the same tick recorded again (a failover's second owner: the first "
        "stands), an earlier tick (no change), two schedules in one record, a tick of a "
        "queue that does not exist (it records nothing), a queue with a tick deleted and "
        "created again (it starts with none), and a tick in the record that creates its "
        "queue.",
        topic="catalog",
    )
    s.plain(T0, OWNER, FormatRaised(3))
    s.plain(T0 + 1, OPERATOR, QueueCreated("mail", 2), QueueCreated("old", 1))
    s.plain(T0 + 2, OWNER, ScheduleTicked("mail", "hourly", tick))
    s.plain(T0 + 3, OWNER, ScheduleTicked("mail", "hourly", tick + hour, "mail:s0:p1:1024"))
    s.plain(T0 + 4, OWNER, ScheduleTicked("mail", "hourly", tick + hour, "mail:s1:p1:2048"))
    s.plain(T0 + 5, OWNER, ScheduleTicked("mail", "hourly", tick, "mail:s0:p1:4096"))
    s.plain(
        T0 + 6,
        OWNER,
        ScheduleTicked("mail", "daily", tick + 24 * hour, "mail:s1:p2:1024"),
        ScheduleTicked("old", "nightly", tick, "old:s0:p1:1024"),
    )
    s.plain(T0 + 7, OWNER, ScheduleTicked("gone", "hourly", tick, "gone:s0:p1:1024"))
    s.plain(T0 + 8, OPERATOR, QueueDeleted("old"), QueueCreated("old", 1))
    s.plain(T0 + 9, OWNER, QueueCreated("born", 1), ScheduleTicked("born", "weekly", tick))
    return s


def keyed_enqueues() -> Story:
    s = Story(
        "v1-keyed-enqueues",
        'Job records of ledger format 3: enqueues of unique jobs (`"k"`, and `"kf"` '
        "for a window after the holder finished, decision 0037). A second enqueue of a key "
        "in the same record is turned away, and one in a later record; once the holder "
        "succeeded, an enqueue within its window is turned away and one without a window "
        "creates the key's next job; a job without a key is never turned away.",
    )
    first = s.plain(
        T0,
        APP,
        Enqueued(b"a", 1, T0, 2, "", unique_key="report:7"),
        Enqueued(b"a again", 1, T0, 2, "", unique_key="report:7"),
        Enqueued(b"b", 1, T0, 2, "", unique_key="report:8"),
    )
    holder = local_id_for(first, 0)
    s.plain(
        T0 + 5,
        APP,
        Enqueued(b"a later", 1, T0, 2, "", unique_key="report:7"),
        Enqueued(b"plain", 1, T0, 2, ""),
    )
    claim = "pinledger-a:1:reporter:1"
    s.plain(T0 + 10, WORKER, Claimed(holder, claim))
    s.plain(T0 + 20, WORKER, Succeeded(holder, "", claim))
    s.plain(
        T0 + 500,
        APP,
        Enqueued(b"a in window", 1, T0, 2, "", unique_key="report:7", unique_for_ms=60_000),
    )
    s.plain(T0 + 600, APP, Enqueued(b"a next", 1, T0, 2, "", unique_key="report:7"))
    return s


def _job(job: Job) -> dict[str, Any]:
    values = job._asdict()
    values["state"] = job.state.name
    values["body_bytes"] = len(values.pop("body"))
    del values["local_id"]
    return values


def folded(records: Sequence[LogRecord]) -> dict[str, Any]:
    """What one queue partition's records fold to through the replay verify's fold
    (projections/verify_fold.py): each timeline row's place, job, type and verdict, the
    jobs left, and their enqueues' trace contexts."""
    fold = PartitionFold(IdRange(), None)
    timeline = []
    for line in fold.events(records):
        offset, idx, local_id = leading_ints(line, 3)
        row = columns(line, EVENT_COLUMNS)
        timeline.append([offset, idx, local_id, row["type"], row["verdict"]])
    return {
        "timeline": timeline,
        "jobs": {str(i): _job(job) for i, job in sorted(fold.jobs.items())},
        "traceparents": {str(i): tp for i, tp in sorted(fold.traceparents.items())},
    }


def expected(story: Story) -> dict[str, Any]:
    """What the records decode and fold to, by the code of this release."""
    if story.topic == "catalog":
        envelopes = [codec.decode(value) for value, _ in story.records]
        events = [e for envelope in envelopes for e in envelope.events]
        found: dict[str, Any] = {
            "catalog": [
                [codec.tag_of(e), *(getattr(e, f) for f in CATALOG_FIELDS if hasattr(e, f))]
                for e in events
            ],
            "ledger_format": formats.folded(formats.PLAIN, events),
        }
        if any(isinstance(e, RecordSkipped) for e in events):
            # Files written before skips existed hold no "skipped".
            found["skipped"] = skipped_json(skips_of(envelopes))
        if any(isinstance(e, QueuePaused) for e in events):
            # Files written before pauses existed hold no "paused".
            found["paused"] = paused_json(envelopes)
        if any(isinstance(e, ScheduleTicked) for e in events):
            # Files written before ticks existed hold no "ticks".
            found["ticks"] = ticks_json(envelopes)
        return found
    return folded(
        [
            LogRecord("q", 0, offset, value, headers)
            for offset, (value, headers) in enumerate(story.records)
        ]
    )


def skipped_json(skips: Skips) -> dict[str, dict[str, str]]:
    """The records the catalog skips, as a corpus file lists them: "queue[partition]" ->
    offset -> reason."""
    return {
        f"{queue}[{partition}]": {str(offset): reason for offset, reason in sorted(offsets.items())}
        for (queue, partition), offsets in sorted(skips.items())
    }


def paused_json(envelopes: list[Envelope]) -> dict[str, bool]:
    """Each queue the catalog lists after the records, paused or not."""
    return {name: row.paused for name, row in sorted(catalog_queues(envelopes).items())}


def ticks_json(envelopes: list[Envelope]) -> list[list[Any]]:
    """The latest tick of each schedule after the records: [queue, schedule, tick_ms,
    job, at], by queue and schedule."""
    return [list(tick) for tick in ticks_of(envelopes)]


def document(story: Story) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "about": story.about,
        "topic": story.topic,
        "records": [
            {
                "offset": offset,
                "value": value.decode("utf-8"),
                "headers": [[k, v.decode("ascii")] for k, v in headers],
            }
            for offset, (value, headers) in enumerate(story.records)
        ],
        "expected": expected(story),
    }


# The fields of catalog events, in the order a file lists them.
CATALOG_FIELDS = (
    "name",
    "partitions",
    "partition",
    "shard",
    "first",
    "reason",
    "format",
    "source",
    "offset",
    "paused",
    "schedule",
    "tick_ms",
    "job",
)
STORIES = (
    lifecycle,
    group_records,
    catalog,
    format_records,
    queue_resized,
    partitions_retired,
    partitions_placed,
    partition_moved,
    guarded_deletes,
    record_skipped,
    queue_paused,
    keyed_enqueues,
    cancelled_jobs,
    schedule_ticked,
)


def read_sums() -> dict[str, str]:
    """The checksum of each corpus file, by name (sha256sum's format)."""
    if not SUMS.exists():
        return {}
    sums = {}
    for line in SUMS.read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    return sums


def main() -> int:
    sums = read_sums()
    for make in STORIES:
        story = make()
        path = HERE / f"{story.name}.json"
        if path.exists():
            print(f"kept {path.name} (a corpus file is never rewritten)")
            continue
        path.write_text(json.dumps(document(story), indent=1, ensure_ascii=False) + "\n")
        sums[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        print(f"wrote {path.name}")
    SUMS.write_text("".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
