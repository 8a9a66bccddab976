"""`pinledger skip-record` on the fakes: what it shows of the record before it skips it,
and the cluster it refuses (decision 0032)."""

from __future__ import annotations

import pytest

from pinledger.cli.main import build_parser
from pinledger.cli.skip_record import SkipRefusedError, describe, skip
from pinledger.ledger import codec
from pinledger.ledger.events import (
    Actor,
    Claimed,
    Enqueued,
    Envelope,
    FormatRaised,
    QueueCreated,
    RecordSkipped,
)
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, LogRecord, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore

ADMIN = Actor(source="test:admin", request_id="", server="test")
PREFIX = "t."


def test_the_record_is_shown_before_it_is_skipped() -> None:
    value = codec.encode(
        Envelope(0, ADMIN, (Enqueued(b"x" * 300, 3, 0, 1, "a\x00b"), Claimed(7001, "c")))
    )
    lines = describe(LogRecord("t.q.mail", 1, 12, value, []))
    assert lines[0] == f"record t.q.mail[1]@12, {len(value)} bytes: 2 event(s)"
    assert lines[1] == "  enq job 12000: 300 body bytes, priority 3, custom status 'a\\x00b'"
    assert lines[2] == "  clm job 7001"
    [garbage] = describe(LogRecord("t.q.mail", 1, 13, b"\x00junk", []))
    assert "cannot be decoded (record value is not JSON" in garbage
    assert "b'\\x00junk'" in garbage


def test_a_cluster_whose_format_has_no_skips_is_refused() -> None:
    log = FakeLog()
    log.create_topic(catalog_topic(PREFIX), 1)
    writer = LedgerWriter(log, PREFIX)
    created = Envelope(0, ADMIN, (FormatRaised(2), QueueCreated("mail", 1)))
    log.append([Append(catalog_topic(PREFIX), 0, codec.encode(created))])
    writer.create_queue("mail", 1, 0, ADMIN)
    writer.append("mail", 0, [Enqueued(b"x", 1, 0, 1)], 0, ADMIN)
    store = FakeStore()
    store.migrate()
    with pytest.raises(
        SkipRefusedError, match="needs ledger format 3; the cluster writes format 2"
    ):
        skip(log, store, PREFIX, RecordSkipped("mail", 0, 0), ADMIN, lambda: 0, print)
    with pytest.raises(SkipRefusedError, match="no NUL"):
        skip(log, store, PREFIX, RecordSkipped("mail", 0, 0, "a\x00"), ADMIN, lambda: 0, print)


def test_the_command_takes_queue_partition_offset_and_a_reason() -> None:
    args = build_parser().parse_args(
        ["skip-record", "--queue", "mail", "--partition", "1", "--offset", "42"]
    )
    assert (args.queue, args.partition, args.offset, args.reason) == ("mail", 1, 42, "")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["skip-record", "--queue", "mail"])
