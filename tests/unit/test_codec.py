"""The record format: every event survives encode/decode unchanged, and decoding is
strict, so a record this version does not understand is refused with a message naming
the problem instead of being half-read."""

from __future__ import annotations

import contextlib
import typing
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.codec import (
    TRACEPARENT_HEADER,
    VERSION,
    CodecError,
    decode,
    encode,
    trace_headers,
    traceparent_of,
)
from pinledger.ledger.events import (
    Actor,
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Envelope,
    Event,
    Failed,
    QueueCreated,
    QueueDeleted,
    Retried,
    Succeeded,
    TimedOut,
)
from tests.unit.strategies import EVENT_STRATEGIES, actors, envelopes, i64

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_there_is_a_strategy_for_every_event_type() -> None:
    assert set(EVENT_STRATEGIES) == set(typing.get_args(Event))


@pytest.mark.parametrize("event_type", list(EVENT_STRATEGIES), ids=lambda t: t.__name__)
@given(data=st.data(), at=i64, actor=actors)
def test_every_event_type_round_trips(
    event_type: type, data: st.DataObject, at: int, actor: Actor
) -> None:
    event = data.draw(EVENT_STRATEGIES[event_type])
    envelope = Envelope(at=at, actor=actor, events=(event,))
    assert decode(encode(envelope)) == envelope


@given(envelopes)
def test_envelopes_of_mixed_events_round_trip(envelope: Envelope) -> None:
    assert decode(encode(envelope)) == envelope


def test_round_trip_keeps_optional_fields_unset_and_set_apart() -> None:
    unset = Checkpointed(local_id=1)
    set_empty = Checkpointed(
        local_id=1, new_body=b"", run_after=0, attempts_allowed=0, prepend_status="", claim=""
    )
    envelope = Envelope(at=5, actor=Actor(), events=(unset, set_empty))
    assert decode(encode(envelope)).events == (unset, set_empty)


def test_record_layout_is_the_documented_one() -> None:
    envelope = Envelope(
        at=1_700_000_000_000,
        actor=Actor(source="mailer:host-1", request_id="r-9", server="pinledger-2"),
        events=(
            Enqueued(body=b"\x00hi", priority=2, run_after=10, attempts_allowed=3),
            Claimed(local_id=7, claim="c-1"),
            Succeeded(local_id=7, append_status="done"),
            Failed(local_id=7, retry_delay_ms=500, append_status="oops", claim="c-1"),
            Checkpointed(local_id=7, move_to_pending=True),
            TimedOut(local_id=7, claim="c-1", touched_at=99),
            Retried(local_id=7, attempts_allowed=2, run_after=11),
            Deleted(local_id=7),
            Deleted(local_id=7, state=3),
            Collected(local_id=7),
            QueueCreated(name="mail", partitions=4),
            QueueDeleted(name="mail"),
        ),
    )
    assert orjson.loads(encode(envelope)) == {
        "v": VERSION,
        "at": 1_700_000_000_000,
        "a": ["mailer:host-1", "r-9", "pinledger-2"],
        "e": [
            {"t": "enq", "b": "AGhp", "p": 2, "r": 10, "n": 3, "s": ""},
            {"t": "clm", "j": 7, "c": "c-1"},
            {"t": "ok", "j": 7, "s": "done", "c": None},
            {"t": "fail", "j": 7, "d": 500, "s": "oops", "c": "c-1"},
            {
                "t": "ckpt",
                "j": 7,
                "b": None,
                "m": True,
                "r": None,
                "n": None,
                "s": None,
                "c": None,
            },
            {"t": "tmo", "j": 7, "c": "c-1", "h": 99},
            {"t": "rtry", "j": 7, "n": 2, "r": 11},
            {"t": "del", "j": 7},
            {"t": "del", "j": 7, "s": 3},
            {"t": "gc", "j": 7},
            {"t": "qnew", "q": "mail", "n": 4},
            {"t": "qdel", "q": "mail"},
        ],
    }


def test_optional_fields_may_be_absent_from_the_record() -> None:
    value = _record([{"t": "ok", "j": 3, "s": ""}, {"t": "ckpt", "j": 3, "m": False}])
    assert decode(value).events == (Succeeded(local_id=3), Checkpointed(local_id=3))


# --- Strict decoding --------------------------------------------------------------------


def _record(events: list[Any] | None = None, **fields: Any) -> bytes:
    record: dict[str, Any] = {"v": VERSION, "at": 1, "a": ["s", "r", "p"], "e": events or []}
    record.update(fields)
    return orjson.dumps({k: v for k, v in record.items() if v is not _ABSENT})


def _event(**fields: Any) -> bytes:
    return _record([{k: v for k, v in fields.items() if v is not _ABSENT}])


_ABSENT = object()
CLAIMED = {"t": "clm", "j": 1, "c": "c-1"}
ENQUEUED = {"t": "enq", "b": "AA==", "p": 1, "r": 0, "n": 2, "s": ""}
UPGRADE = "written by another pinledger version; upgrade this one to read it"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param(b"not json", "record value is not JSON", id="not-json"),
        pytest.param(b"\xff\xfe", "record value is not JSON", id="not-utf8"),
        pytest.param(b"[1, 2]", "record value must be a JSON object", id="array"),
        pytest.param(b'"text"', "record value must be a JSON object", id="string"),
        pytest.param(_record(v=2), f"record version 2 is not 1: {UPGRADE}", id="newer-version"),
        pytest.param(_record(v=0), "record version 0 is not 1", id="older-version"),
        pytest.param(_record(v=_ABSENT), "record version None is not 1", id="no-version"),
        pytest.param(_record(v="1"), "record version '1' is not 1", id="version-string"),
        pytest.param(_record(v=True), "record version True is not 1", id="version-bool"),
        pytest.param(_record(v=1.0), "record version 1.0 is not 1", id="version-float"),
        pytest.param(_record(a=_ABSENT), "record lacks field 'a'", id="no-actor"),
        pytest.param(_record(a="s"), "record field 'a' has type str", id="actor-string"),
        pytest.param(
            _record(a=["s", "r"]),
            "record actor must be [source, request_id, server]",
            id="actor-too-short",
        ),
        pytest.param(
            _record(a=["s", "r", 3]),
            "record actor must be [source, request_id, server]",
            id="actor-not-strings",
        ),
        pytest.param(_record(at=_ABSENT), "record lacks field 'at'", id="no-time"),
        pytest.param(_record(at="1"), "record field 'at' has type str", id="time-string"),
        pytest.param(_record(at=True), "record field 'at' has type bool", id="time-bool"),
        pytest.param(_record(at=1.5), "record field 'at' has type float", id="time-float"),
        pytest.param(_record(e=_ABSENT), "record lacks field 'e'", id="no-events"),
        pytest.param(_record(e={}), "record field 'e' has type dict", id="events-object"),
        pytest.param(_record([3]), "an event must be an object, got int", id="event-number"),
        pytest.param(_event(t="zap", j=1), "unknown event type 'zap'", id="unknown-type"),
        pytest.param(_event(j=1), "unknown event type None", id="no-type"),
        pytest.param(_event(t=["clm"], j=1), "unknown event type ['clm']", id="type-list"),
        pytest.param(
            _event(**{**CLAIMED, "c": _ABSENT}), "event 'clm' lacks field 'c'", id="no-claim"
        ),
        pytest.param(
            _event(**{**CLAIMED, "j": "1"}),
            "event 'clm' field 'j' has type str",
            id="local-id-string",
        ),
        pytest.param(
            _event(**{**CLAIMED, "j": True}),
            "event 'clm' field 'j' has type bool",
            id="bool-as-int",
        ),
        pytest.param(
            _event(t="ckpt", j=1, m=1), "event 'ckpt' field 'm' has type int", id="int-as-bool"
        ),
        pytest.param(
            _event(t="ok", j=1, s="", c=5), "event 'ok' field 'c' has type int", id="opt-wrong"
        ),
        pytest.param(
            _event(t="qnew", q="mail", n="4"),
            "event 'qnew' field 'n' has type str",
            id="partitions-string",
        ),
        pytest.param(
            _event(**{**ENQUEUED, "b": 5}), "event 'enq' field 'b' has type int", id="body-int"
        ),
        pytest.param(
            _event(t="ckpt", j=1, m=False, b=5),
            "event 'ckpt' field 'b' has type int",
            id="new-body-int",
        ),
        pytest.param(
            _event(**{**ENQUEUED, "b": "not base64!"}),
            "invalid base64 body",
            id="body-bad-alphabet",
        ),
        pytest.param(
            _event(**{**ENQUEUED, "b": "AAA"}), "invalid base64 body", id="body-bad-padding"
        ),
        pytest.param(
            _event(**{**ENQUEUED, "b": "AA==\n"}), "invalid base64 body", id="body-newline"
        ),
        pytest.param(
            _event(**{**ENQUEUED, "b": "ÀÀ=="}), "invalid base64 body", id="body-not-ascii"
        ),
        pytest.param(
            _event(t="ckpt", j=1, m=False, b="@@"),
            "invalid base64 body",
            id="new-body-bad-base64",
        ),
    ],
)
def test_undecodable_record_is_refused_with_a_message_naming_the_problem(
    value: bytes, problem: str
) -> None:
    with pytest.raises(CodecError) as raised:
        decode(value)
    assert problem in str(raised.value)


@given(st.binary())
def test_decoding_arbitrary_bytes_either_succeeds_or_raises_codec_error(value: bytes) -> None:
    with contextlib.suppress(CodecError):
        decode(value)


json_values = st.recursive(
    st.none() | st.booleans() | i64 | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3)
    ),
    max_leaves=8,
)


@given(envelope=envelopes, data=st.data())
def test_a_record_with_any_field_replaced_or_removed_decodes_or_raises_codec_error(
    envelope: Envelope, data: st.DataObject
) -> None:
    record = orjson.loads(encode(envelope))
    target = data.draw(st.sampled_from([record, *record["e"]]), label="object")
    key = data.draw(st.sampled_from(sorted(target)) | st.text(max_size=2), label="key")
    value = data.draw(json_values | st.just(_ABSENT), label="value")
    if value is _ABSENT:
        target.pop(key, None)
    else:
        target[key] = value
    with contextlib.suppress(CodecError):
        decode(orjson.dumps(record))


# --- Trace context headers --------------------------------------------------------------


def test_trace_headers_carry_the_traceparent() -> None:
    assert trace_headers(TRACEPARENT) == [(TRACEPARENT_HEADER, TRACEPARENT.encode())]


@pytest.mark.parametrize("traceparent", [None, ""])
def test_no_trace_context_means_no_headers(traceparent: str | None) -> None:
    assert trace_headers(traceparent) == []


def test_traceparent_round_trips_through_headers() -> None:
    assert traceparent_of(trace_headers(TRACEPARENT)) == TRACEPARENT


def test_traceparent_is_found_among_other_headers() -> None:
    headers = [("x-other", b"1"), (TRACEPARENT_HEADER, TRACEPARENT.encode())]
    assert traceparent_of(headers) == TRACEPARENT


@pytest.mark.parametrize("headers", [None, [], [("x-other", b"1")]])
def test_records_without_traceparent_have_none(headers: list[tuple[str, bytes]] | None) -> None:
    assert traceparent_of(headers) is None


def test_a_garbled_traceparent_header_does_not_raise() -> None:
    assert traceparent_of([(TRACEPARENT_HEADER, b"00-\xff")]) == "00-\ufffd"
