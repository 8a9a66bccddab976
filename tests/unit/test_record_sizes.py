"""Records are sized by their encoded bytes against the broker's limit (issue 38): a
call's events are cut into records the broker takes, whatever their bodies and
statuses weigh once encoded; a job too big for any record is refused before anything
is appended; and one caller's big append never fails the appends it shares a round
trip or a group record with."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.idl import pinlater
from pinledger.ledger import codec, formats
from pinledger.ledger.commands import RefusalCode, Refused
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Actor, Claimed, Enqueued, Envelope, Event, Succeeded
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.group_commit import GroupCommit, Part
from pinledger.ledger.log import (
    BROKER_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    RECORD_OVERHEAD,
    Append,
    RecordTooLargeError,
    TopicState,
    record_bytes,
)
from pinledger.ledger.writer import LedgerWriter
from pinledger.service.server import warn_if_unsafe
from pinledger.service.testing.runtime import TEST_CONFIG, Runtime
from tests.unit.strategies import envelopes, events

ACTOR = Actor(source="worker:1", request_id="r", server="s1")
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _writer(
    log: FakeLog, grouped: bool = True, limit: int = DEFAULT_MAX_RECORD_BYTES
) -> LedgerWriter:
    writer = LedgerWriter(log, "p.", limit)
    writer.follow_format(formats.LATEST if grouped else formats.PLAIN)
    log.create_topic(writer.topic("q"), 1)
    return writer


def _jobs(count: int, status: str = "", body: bytes = b"b") -> list[Enqueued]:
    return [
        Enqueued(body=body, priority=1, run_after=0, attempts_allowed=1, custom_status=status)
        for _ in range(count)
    ]


def _records(log: FakeLog) -> list[tuple[int, list[Event]]]:
    """(record_bytes, events) of each record of p.q.q[0]."""
    return [
        (record_bytes(len(r.value), r.headers), codec.record_events(r.value, r.headers))
        for r in log.records("p.q.q", 0)
    ]


def _named(log: FakeLog, descriptors: Sequence[JobDescriptor]) -> list[Event]:
    """The events the descriptors name in the log."""
    by_id = {
        record.offset * 1000 + i: event
        for record in log.records("p.q.q", 0)
        for i, event in enumerate(codec.record_events(record.value, record.headers))
    }
    return [by_id[d.local_id] for d in descriptors]


def test_a_record_counts_its_value_its_headers_and_its_framing() -> None:
    header = ("traceparent", TRACEPARENT.encode())
    assert record_bytes(10, []) == 10 + RECORD_OVERHEAD
    assert record_bytes(10, [header]) == 10 + RECORD_OVERHEAD + 11 + 55 + 10


@given(envelopes)
def test_an_envelopes_size_is_its_events_sizes_with_the_commas_between(
    envelope: Envelope,
) -> None:
    """What the writer cuts by is exact: orjson writes no spaces."""
    empty = codec.encode(Envelope(envelope.at, envelope.actor, ()))
    sizes = codec.event_sizes(envelope.events)
    commas = max(0, len(sizes) - 1)
    assert len(codec.encode(envelope)) == len(empty) + sum(sizes) + commas


@settings(max_examples=60, deadline=None)
@given(
    st.lists(events, min_size=1, max_size=40),
    st.integers(min_value=400, max_value=4000),
    st.none() | st.just(TRACEPARENT),
    st.booleans(),
)
def test_any_call_is_cut_into_records_under_the_limit_or_refused_whole(
    given_events: list[Event], limit: int, traceparent: str | None, grouped: bool
) -> None:
    log = FakeLog(max_record_bytes=limit)
    writer = _writer(log, grouped, limit)
    try:
        offsets = writer.append_many([("q", 0, given_events)], 7, ACTOR, traceparent)
    except RecordTooLargeError:
        assert log.records("p.q.q", 0) == [], "part of a refused call was appended"
        alone = [Envelope(7, ACTOR, (e,)) for e in given_events]
        headers = codec.trace_headers(traceparent)
        assert any(record_bytes(len(codec.encode(a)), headers) > limit for a in alone), (
            "refused though each event fits a record of its own"
        )
        return
    found = _records(log)
    assert offsets == [0]
    assert all(size <= limit for size, _ in found)
    assert [e for _, record in found for e in record] == given_events


def test_an_enqueue_of_big_statuses_is_cut_into_records_the_broker_takes() -> None:
    """300 jobs of 5,000-character statuses: 1.5 MB encoded, which the broker refuses
    as one record."""
    log = FakeLog()
    writer = _writer(log)
    jobs = _jobs(300, "s" * 5000)
    descriptors = writer.enqueue("q", 0, jobs, 7, ACTOR)
    found = _records(log)
    assert len(found) > 1
    assert all(size <= DEFAULT_MAX_RECORD_BYTES for size, _ in found)
    assert _named(log, descriptors) == jobs


def test_statuses_that_grow_when_escaped_are_sized_as_encoded() -> None:
    """A control character takes six bytes in JSON: 40 such statuses are 1.2 MB."""
    log = FakeLog()
    writer = _writer(log)
    jobs = _jobs(40, "\x01" * 5000)
    descriptors = writer.enqueue("q", 0, jobs, 7, ACTOR)
    assert all(size <= DEFAULT_MAX_RECORD_BYTES for size, _ in _records(log))
    assert _named(log, descriptors) == jobs


def test_acks_of_big_statuses_are_cut_too() -> None:
    log = FakeLog()
    writer = _writer(log)
    acks = [Succeeded(local_id=i, append_status="a" * 5000) for i in range(300)]
    writer.append_many([("q", 0, acks)], 7, ACTOR)
    found = _records(log)
    assert len(found) > 1
    assert [e for _, record in found for e in record] == acks


def test_a_job_too_big_for_any_record_is_refused_naming_its_size_and_the_limit() -> None:
    log = FakeLog()
    writer = _writer(log)
    jobs = [*_jobs(2), *_jobs(1, body=b"x" * 800_000)]
    with pytest.raises(Refused) as refused:
        writer.enqueue("q", 0, jobs, 7, ACTOR)
    assert refused.value.code is RefusalCode.ENQUEUE_REJECTED
    message = refused.value.message
    assert message.startswith("job 2: its record would be ")
    assert f"over the limit of {DEFAULT_MAX_RECORD_BYTES} bytes" in message
    assert log.records("p.q.q", 0) == [], "nothing of a refused enqueue is appended"


def test_a_one_job_enqueue_is_one_record_encoded_once() -> None:
    log = FakeLog()
    writer = _writer(log)
    [descriptor] = writer.enqueue("q", 0, _jobs(1), 7, ACTOR, TRACEPARENT)
    [record] = log.records("p.q.q", 0)
    assert record.value == codec.encode(Envelope(7, ACTOR, tuple(_jobs(1))))
    assert descriptor.local_id == 0


def test_a_part_over_the_record_limit_is_refused_before_it_is_queued() -> None:
    log = FakeLog()
    log.create_topic("t", 1)
    group = GroupCommit(log, record_limit=1000)
    envelope = Envelope(1, ACTOR, (Succeeded(local_id=1, append_status="x" * 1000),))
    value = codec.encode(envelope)
    part = Part("t", 0, value, codec.encode_part(envelope, None, value), None, 1)
    with pytest.raises(RecordTooLargeError, match="over the limit of 1000"):
        group.append([part])
    assert (group.records, group.waiting(), log.records("t", 0)) == (0, 0, [])


class _GatedLog(FakeLog):
    """The first append waits until `opened`: the callers behind it queue up, and the
    next append takes them together."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = threading.Event()
        self.entered = threading.Event()
        self._first = True

    def append(self, appends: Sequence[Append]) -> list[int]:
        if self._first:
            self._first = False
            self.entered.set()
            assert self.opened.wait(10)
        return super().append(appends)


@pytest.mark.parametrize("grouped", [True, False], ids=["format-2", "format-1"])
def test_one_callers_huge_enqueue_never_fails_the_small_ones_it_shares_appends_with(
    grouped: bool,
) -> None:
    log = _GatedLog()
    writer = _writer(log, grouped)
    writer.group.max_in_flight = 1  # everything behind the first append waits for it
    results: dict[str, object] = {}

    def enqueue(name: str, jobs: list[Enqueued]) -> None:
        try:
            results[name] = writer.enqueue("q", 0, jobs, 7, Actor(source=name))
        except (Refused, RecordTooLargeError) as exc:
            results[name] = exc

    def start(name: str, jobs: list[Enqueued]) -> threading.Thread:
        thread = threading.Thread(target=enqueue, args=(name, jobs))
        thread.start()
        return thread

    small = {f"small{i}": _jobs(2, f"small{i}") for i in range(6)}
    big = _jobs(300, "s" * 5000)
    threads = [start("first", _jobs(1))]
    assert log.entered.wait(10)
    # Smalls ahead of the big one and behind it, all waiting for the same append.
    threads += [start(name, small[name]) for name in list(small)[:3]]
    _wait_queued(writer, 3)
    threads.append(start("big", big))
    threads.append(start("huge", _jobs(1, body=b"x" * 800_000)))
    threads += [start(name, small[name]) for name in list(small)[3:]]
    _wait_queued(writer, 6 + 1)  # the smalls and the big one's first part at least
    log.opened.set()
    for thread in threads:
        thread.join(10)
    huge = results["huge"]
    assert isinstance(huge, Refused) and huge.code is RefusalCode.ENQUEUE_REJECTED
    for name, jobs in [*small.items(), ("big", big)]:
        descriptors = results[name]
        assert isinstance(descriptors, list), f"{name}: {descriptors}"
        assert _named(log, descriptors) == jobs
    found = _records(log)
    assert all(size <= DEFAULT_MAX_RECORD_BYTES for size, _ in found)
    if grouped:
        shared = [events for _, events in found if _sources(events) > 1]
        assert shared, "no record was shared"


def _sources(found: list[Event]) -> int:
    return len({e.custom_status[:6] for e in found if isinstance(e, Enqueued)})


def _wait_queued(writer: LedgerWriter, parts: int) -> None:
    for _ in range(5000):
        if writer.group.waiting() >= parts:
            return
        threading.Event().wait(0.002)
    raise AssertionError(f"fewer than {parts} parts queued after 10 s")


def test_the_fake_broker_refuses_a_record_over_its_limit_and_writes_nothing() -> None:
    log = FakeLog()
    log.create_topic("t", 2)
    fits = b"x" * (BROKER_MAX_MESSAGE_BYTES - RECORD_OVERHEAD)
    with pytest.raises(
        RecordTooLargeError, match=f"max.message.bytes of {BROKER_MAX_MESSAGE_BYTES}"
    ):
        log.append([Append("t", 0, b"small"), Append("t", 1, fits + b"x")])
    assert log.end_offsets([("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
    assert log.append([Append("t", 1, fits)]) == [0]


def test_a_server_takes_an_enqueue_of_big_statuses_while_others_enqueue() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        rt.wait_serving("mail", TEST_CONFIG.partitions, [node])
        big = [pinlater.PinLaterJob(body=b"%d" % i, customStatus="s" * 5000) for i in range(300)]
        small: list[list[str]] = []
        others = [
            threading.Thread(target=lambda: small.append(node.enqueue("mail", _job(b"small"))))
            for _ in range(4)
        ]
        for thread in others:
            thread.start()
        descriptors = node.enqueue("mail", *big)
        for thread in others:
            thread.join(10)
        assert len(small) == 4
        rt.settle()
        assert len(descriptors) == 300
        found = [node.lookup(d) for d in descriptors[::37]]
        assert {(info.jobState, info.customStatus) for info in found} == {
            (pinlater.PinLaterJobState.PENDING, "s" * 5000)
        }
        assert len(node.dequeue("mail", 1000)) == 304


def _job(body: bytes) -> pinlater.PinLaterJob:
    return pinlater.PinLaterJob(body=body)


def test_claimed_events_are_small_enough_to_never_be_cut() -> None:
    """A dequeue of the most jobs one call may take is one claim record per partition."""
    claims = [Claimed(local_id=i * 1000, claim="s1:1:worker:1:1") for i in range(1000)]
    assert sum(codec.event_sizes(claims)) < DEFAULT_MAX_RECORD_BYTES // 10


class _Inspector:
    """A cluster of one broker whose catalog topic takes records of `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def broker_count(self) -> int:
        return 1

    def topic_states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        return {
            name: TopicState(name, 1, 1, 0, 0, 1, -1, -1, "delete", False, self.limit)
            for name in topics
        }


def test_a_server_writes_no_record_bigger_than_its_topics_take(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = FakeLog(max_record_bytes=300_000)
    writer = _writer(log)
    warn_if_unsafe(_Inspector(300_000), "p.catalog", writer)
    assert writer.max_record_bytes == 300_000
    [line] = [r.getMessage() for r in caplog.records if "max.message.bytes" in r.getMessage()]
    assert "takes records of at most 300000 bytes" in line
    descriptors = writer.enqueue("q", 0, _jobs(300, "s" * 5000), 7, ACTOR)
    assert len(descriptors) == 300
    assert all(size <= 300_000 for size, _ in _records(log))
    warn_if_unsafe(_Inspector(2_000_000), "p.catalog", writer)
    assert writer.max_record_bytes == 300_000, "a limit is never raised past the setting"
