"""Group commit (ledger/group_commit.py, decision 0020): concurrent appends to one
partition share records, and every caller still learns exactly where its own events
landed; a lone caller appends at once; a failed append fails every caller in it and
leaves none waiting, and says nothing was written only when none of a caller's records
was; the group record format decodes back to each caller's envelope."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import local_id_for, parse
from pinledger.ledger.events import Actor, Claimed, Enqueued, Envelope
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.group_commit import GroupCommit, Part
from pinledger.ledger.log import Append, LogError, NotAppendedError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import ProjectionRunner, Scope
from pinledger.projections.verify import verify
from tests.unit.strategies import envelopes

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
traceparents = st.none() | st.just(TRACEPARENT)


@given(st.lists(st.tuples(envelopes, traceparents), min_size=2, max_size=6))
def test_a_group_record_decodes_to_each_envelope_with_its_trace_and_first_index(
    members: list[tuple[Envelope, str | None]],
) -> None:
    value = codec.encode_group([codec.encode_part(e, tp) for e, tp in members])
    parts = codec.decode_parts(value, None)
    assert [(p.envelope, p.traceparent) for p in parts] == members
    firsts = [0]
    for envelope, _ in members[:-1]:
        firsts.append(firsts[-1] + len(envelope.events))
    assert [p.first for p in parts] == firsts


@given(st.lists(envelopes, min_size=1, max_size=6))
def test_a_records_events_are_its_envelopes_events_in_order(members: list[Envelope]) -> None:
    if len(members) == 1:
        value = codec.encode(members[0])
    else:
        value = codec.encode_group([codec.encode_part(e, None) for e in members])
    assert codec.record_events(value, None) == [e for m in members for e in m.events]


@given(envelopes, traceparents)
def test_a_plain_record_is_one_part_with_the_header_trace(
    envelope: Envelope, traceparent: str | None
) -> None:
    parts = codec.decode_parts(codec.encode(envelope), codec.trace_headers(traceparent))
    assert parts == [codec.Part(envelope, traceparent, 0)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"[]", "non-empty JSON array"),
        (b"[1]", "must be a JSON object"),
        (b'[{"v":1}', "not JSON"),
        (b'[{"v":1,"at":1,"a":["","",""],"e":[],"tp":5}]', "'tp' has type int"),
    ],
)
def test_a_malformed_group_record_is_refused_by_name(value: bytes, message: str) -> None:
    with pytest.raises(codec.CodecError, match=message):
        codec.decode_parts(value, None)


def _log(partitions: int = 2) -> FakeLog:
    log = FakeLog()
    log.create_topic("t", partitions)
    return log


def _part(partition: int, events: Sequence[Claimed], source: str) -> Part:
    envelope = Envelope(at=1, actor=Actor(source=source), events=tuple(events))
    value = codec.encode(envelope)
    return Part("t", partition, value, codec.encode_part(envelope, None, value), None, len(events))


def _landed(log: FakeLog, part: Part) -> tuple[Actor, tuple[object, ...]]:
    """The actor and events found in the log where the group commit says `part` is."""
    [record] = [r for r in log.records("t", part.partition) if r.offset == part.offset]
    for found in codec.decode_parts(record.value, record.headers):
        if found.first == part.first:
            return found.envelope.actor, found.envelope.events
    raise AssertionError(f"no envelope at index {part.first} of offset {part.offset}")


class _SlowLog(FakeLog):
    """Each append takes a while, so that concurrent callers pile up behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def append(self, appends: Sequence[Append]) -> list[int]:
        self.calls += 1
        threading.Event().wait(0.01)
        return super().append(appends)


def test_concurrent_callers_share_records_and_each_finds_its_own_events() -> None:
    log = _SlowLog()
    log.create_topic("t", 2)
    group = GroupCommit(log)
    callers = 24
    parts = [
        [_part(i % 2, [Claimed(local_id=i * 10 + k, claim=f"c{i}") for k in range(3)], f"s{i}")]
        for i in range(callers)
    ]
    start = threading.Barrier(callers)

    def call(mine: list[Part]) -> None:
        start.wait()
        group.append(mine)

    threads = [threading.Thread(target=call, args=(p,)) for p in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert group.parts == callers
    assert group.records < callers  # shared
    assert log.calls < callers
    for i, (part,) in enumerate(parts):
        actor, events = _landed(log, part)
        assert actor.source == f"s{i}"
        assert [e.local_id for e in events] == [i * 10 + k for k in range(3)]  # type: ignore[attr-defined]


def test_a_lone_caller_gets_a_plain_record_of_its_own() -> None:
    log = _log()
    group = GroupCommit(log)
    part = _part(0, [Claimed(local_id=1, claim="c")], "alone")
    group.append([part])
    [record] = log.records("t", 0)
    assert not record.value.startswith(b"[")
    assert (part.offset, part.first, group.records) == (0, 0, 1)


def test_a_group_never_holds_more_events_than_a_record_may() -> None:
    log = _SlowLog()
    log.create_topic("t", 1)
    group = GroupCommit(log, max_events=5)
    parts = [
        [_part(0, [Claimed(local_id=i * 10 + k, claim="c") for k in range(2)], "s")]
        for i in range(9)
    ]
    threads = [threading.Thread(target=group.append, args=(p,)) for p in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for record in log.records("t", 0):
        found = codec.decode_parts(record.value, record.headers)
        assert sum(len(p.envelope.events) for p in found) <= 5
    assert group.parts == 9


def test_a_failed_append_fails_each_caller_in_it_and_the_next_ones_go_on() -> None:
    log = _log()
    group = GroupCommit(log)
    log.fail(operations=["append"])
    part = _part(0, [Claimed(local_id=1, claim="c")], "s")
    with pytest.raises(LogError):
        group.append([part])
    log.heal()
    again = _part(0, [Claimed(local_id=1, claim="c")], "s")
    group.append([again])
    assert again.offset == 0


def test_concurrent_enqueues_get_distinct_descriptors_naming_their_own_jobs() -> None:
    log = _SlowLog()
    writer = LedgerWriter(log, "p.")
    writer.follow_format(formats.GROUPED)
    log.create_topic(writer.topic("q"), 1)
    callers = 16
    found: dict[int, list[int]] = {}
    start = threading.Barrier(callers)

    def enqueue(i: int) -> None:
        jobs = [
            Enqueued(body=b"%d-%d" % (i, k), priority=1, run_after=0, attempts_allowed=1)
            for k in range(2)
        ]
        start.wait()
        found[i] = [d.local_id for d in writer.enqueue("q", 0, jobs, 1, Actor(source=f"s{i}"))]

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    bodies: dict[int, bytes] = {}
    for record in log.records(writer.topic("q"), 0):
        for part in codec.decode_parts(record.value, record.headers):
            for i, event in enumerate(part.envelope.events, start=part.first):
                assert isinstance(event, Enqueued)
                bodies[local_id_for(record.offset, i)] = event.body
    assert writer.group.records < callers
    for i, ids in found.items():
        assert [bodies[local_id] for local_id in ids] == [b"%d-0" % i, b"%d-1" % i]


def test_at_ledger_format_1_concurrent_callers_share_appends_but_write_plain_records() -> None:
    """A cluster some live server of an older release reads at format 1 gets no group
    record from this writer (the writer's state until told the cluster's format), and
    concurrent callers still share round trips."""
    log = _SlowLog()
    writer = LedgerWriter(log, "p.")
    log.create_topic(writer.topic("q"), 1)
    callers = 16
    found: dict[int, list[int]] = {}
    start = threading.Barrier(callers)

    def enqueue(i: int) -> None:
        jobs = [
            Enqueued(body=b"%d-%d" % (i, k), priority=1, run_after=0, attempts_allowed=1)
            for k in range(2)
        ]
        start.wait()
        found[i] = [d.local_id for d in writer.enqueue("q", 0, jobs, 1, Actor(source=f"s{i}"))]

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    records = log.records(writer.topic("q"), 0)
    assert len(records) == callers
    assert all(not r.value.startswith(b"[") for r in records)  # no group record
    assert log.calls < callers  # but callers shared appends
    for i, ids in found.items():
        bodies = []
        for local_id in ids:
            event = codec.decode(records[local_id // 1000].value).events[local_id % 1000]
            assert isinstance(event, Enqueued)
            bodies.append(event.body)
        assert bodies == [b"%d-0" % i, b"%d-1" % i]


def test_group_records_project_and_verify_like_plain_ones() -> None:
    log = _SlowLog()
    writer = LedgerWriter(log, "p.")
    writer.follow_format(formats.GROUPED)
    writer.create_queue("q", 1, 0, Actor(source="admin"))
    callers = 12
    start = threading.Barrier(callers)
    descriptors: dict[int, str] = {}

    def enqueue(i: int) -> None:
        job = Enqueued(body=b"job-%d" % i, priority=1, run_after=0, attempts_allowed=1)
        start.wait()
        [descriptor] = writer.enqueue("q", 0, [job], 1, Actor(source=f"s{i}"), TRACEPARENT)
        descriptors[i] = str(descriptor)

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert writer.group.records < callers
    store = FakeStore()
    store.migrate()
    runner = ProjectionRunner(store, log, "p.")
    try:
        runner.catch_up()
    finally:
        runner.close()
    for i, text in descriptors.items():
        d = parse(text)
        [event] = store.job_events("q", d.partition, d.local_id)
        assert (event.type, event.source, event.traceparent) == ("enq", f"s{i}", TRACEPARENT)
    report = verify(store, log, "p.", Scope())
    assert report.identical, report.diffs


def test_a_call_of_many_records_goes_out_in_one_append_in_its_order() -> None:
    log = _SlowLog()
    log.create_topic("t", 1)
    group = GroupCommit(log, max_events=2)
    parts = [
        _part(0, [Claimed(local_id=i * 2 + k, claim="c") for k in range(2)], "s") for i in range(4)
    ]
    group.append(parts)
    assert log.calls == 1  # not a round trip per record
    assert [p.offset for p in parts] == [0, 1, 2, 3]
    for i, part in enumerate(parts):
        _, events = _landed(log, part)
        assert [e.local_id for e in events] == [i * 2, i * 2 + 1]  # type: ignore[attr-defined]


def test_an_enqueue_of_long_statuses_is_split_into_records_kafka_takes() -> None:
    # 1000 jobs of 5000-character statuses (PinLater's cap; control characters take 6
    # bytes each in JSON) were one record of 30 MB, which Kafka refused.
    log = FakeLog()
    writer = LedgerWriter(log, "p.")
    log.create_topic(writer.topic("q"), 1)
    jobs = [Enqueued(b"b", 1, 0, 1, custom_status="\x01" * 5000) for _ in range(1000)]
    descriptors = writer.enqueue("q", 0, jobs, 1, Actor(source="s"))
    records = log.records(writer.topic("q"), 0)
    assert len(descriptors) == 1000 and len(records) > 1
    assert max(len(record.value) for record in records) < 1024 * 1024


class _RefusingLog(FakeLog):
    """Appends to partition 1 wait until `opened`, then are refused: certainly not
    written."""

    def __init__(self) -> None:
        super().__init__()
        self.create_topic("t", 2)
        self.entered = threading.Event()
        self.opened = threading.Event()

    def append(self, appends: Sequence[Append]) -> list[int]:
        if any(a.partition == 1 for a in appends):
            self.entered.set()
            assert self.opened.wait(10)
            raise NotAppendedError("partition 1 refused the record")
        return super().append(appends)


def test_an_error_says_nothing_was_written_only_when_none_of_the_callers_records_was() -> None:
    log = _RefusingLog()
    group = GroupCommit(log, max_in_flight=1)
    ahead_failed: list[Exception] = []

    def go_ahead() -> None:
        try:
            group.append([_part(1, [], "ahead")])
        except LogError as exc:
            ahead_failed.append(exc)

    ahead = threading.Thread(target=go_ahead)
    ahead.start()
    assert log.entered.wait(10)
    mine = [_part(0, [Claimed(local_id=1, claim="c")], "me"), _part(1, [], "me")]
    failed: list[Exception] = []

    def call() -> None:
        try:
            group.append(mine)
        except LogError as exc:
            failed.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    for _ in range(5000):  # its record of partition 0 went at once; the other waits
        if mine[0].done and group.waiting() == 1:
            break
        threading.Event().wait(0.002)
    log.opened.set()
    caller.join(10)
    ahead.join(10)
    assert mine[0].offset == 0 and len(log.records("t", 0)) == 1
    [certain] = ahead_failed  # its one record refused: nothing of it written
    assert isinstance(certain, NotAppendedError)
    [error] = failed
    assert not isinstance(error, NotAppendedError), "said nothing was written"
    assert "other records of this call may be in the log" in str(error)


def test_every_append_to_the_log_is_timed_failed_ones_too() -> None:
    """pinledger_log_append_seconds: the writer's group commits, its catalog records and
    its records of their own each report one append's time, and a failed append reports
    its time before its error reaches the caller."""
    log = _SlowLog()
    writer = LedgerWriter(log, "p.")
    times: list[float] = []
    writer.time_appends(times.append)
    actor = Actor("test", "s1")
    writer.ensure_catalog(0, actor)
    writer.create_queue("q", 1, 0, actor)
    catalog = len(times)
    assert catalog == log.calls >= 1
    writer.append("q", 0, [Enqueued(b"x", 1, 0, 3)], 0, actor)
    writer.append_records([("q", 0, [Enqueued(b"y", 1, 0, 3)])], 0, actor)
    assert len(times) == log.calls == catalog + 2
    assert all(t >= 0.01 for t in times)  # the slow log's 10 ms each
    log.fail("broker timed out", ["append"])
    with pytest.raises(LogError, match="broker timed out"):
        writer.append("q", 0, [Enqueued(b"z", 1, 0, 3)], 0, actor)
    assert len(times) == log.calls == catalog + 3
