"""Encoding of envelopes as Kafka record values (orjson), and of the trace context as
record headers.

The format is a JSON object `{"v": VERSION, "at": ms, "a": [source, request_id,
server], "e": [event, ...]}`; each event is an object with a type tag `t` and short
field names. Bodies are base64 (JSON has no bytes). Decoding is strict: an unknown
version, type or a missing field raises `CodecError` naming the problem, so a record
written by a newer pinledger is never half-understood.

A *group record* (ledger/group_commit.py, decision 0020) is a JSON array of such
objects, one per call that shared the record, each with its trace context inside
(`"tp"`); `decode_parts` reads either form.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pinledger.ledger.events import (
    Actor,
    Cancelled,
    CatalogEvent,
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

VERSION = 1
TRACEPARENT_HEADER = "traceparent"

Headers = list[tuple[str, bytes]]


class CodecError(ValueError):
    """A record value that is not a valid pinledger envelope."""


# The type tag ("t") each event is encoded with: the one name of an event type outside
# Python, also what the projection's job_events.type stores.
EVENT_TAGS: dict[type[Event], str] = {
    Enqueued: "enq",
    Claimed: "clm",
    Succeeded: "ok",
    Failed: "fail",
    Checkpointed: "ckpt",
    TimedOut: "tmo",
    Retried: "rtry",
    Deleted: "del",
    Collected: "gc",
    QueueCreated: "qnew",
    QueueDeleted: "qdel",
    QueueResized: "qsize",
    PartitionsRetired: "qret",
    PartitionPlaced: "qplace",
    PartitionMoved: "qmove",
    RecordSkipped: "qskip",
    QueuePaused: "qpause",
    ScheduleTicked: "stick",
    FormatRaised: "fmt",
    Cancelled: "cncl",
}


def tag_of(event: Event) -> str:
    """The type tag an event is encoded with."""
    return EVENT_TAGS[type(event)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    # binascii.Error for bad padding or alphabet; a plain ValueError for non-ASCII text.
    except ValueError as exc:
        raise CodecError(f"invalid base64 body: {exc}") from None


def _opt_b64(data: bytes | None) -> str | None:
    return None if data is None else _b64(data)


def _encode_enqueued(event: Enqueued) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "t": EVENT_TAGS[Enqueued],
        "b": _b64(event.body),
        "p": event.priority,
        "r": event.run_after,
        "n": event.attempts_allowed,
        "s": event.custom_status,
    }
    # Only imported jobs carry it: every other record stays as it was.
    if event.imported_from is not None:
        encoded["i"] = event.imported_from
    # Only keyed jobs (ledger format 3): a record without a key stays as it was.
    if event.unique_key is not None:
        encoded["k"] = event.unique_key
        if event.unique_for_ms:
            encoded["kf"] = event.unique_for_ms
    return encoded


def _encode_event(event: Event) -> dict[str, Any]:
    match event:
        case Enqueued():
            return _encode_enqueued(event)
        case Claimed():
            return {"t": EVENT_TAGS[Claimed], "j": event.local_id, "c": event.claim}
        case Succeeded():
            return {
                "t": EVENT_TAGS[Succeeded],
                "j": event.local_id,
                "s": event.append_status,
                "c": event.claim,
            }
        case Failed():
            return {
                "t": EVENT_TAGS[Failed],
                "j": event.local_id,
                "d": event.retry_delay_ms,
                "s": event.append_status,
                "c": event.claim,
            }
        case Checkpointed():
            return {
                "t": EVENT_TAGS[Checkpointed],
                "j": event.local_id,
                "b": _opt_b64(event.new_body),
                "m": event.move_to_pending,
                "r": event.run_after,
                "n": event.attempts_allowed,
                "s": event.prepend_status,
                "c": event.claim,
            }
        case TimedOut():
            return {
                "t": EVENT_TAGS[TimedOut],
                "j": event.local_id,
                "c": event.claim,
                "h": event.touched_at,
            }
        case Retried():
            return {
                "t": EVENT_TAGS[Retried],
                "j": event.local_id,
                "n": event.attempts_allowed,
                "r": event.run_after,
            }
        case Deleted():
            # Only a guarded delete (ledger format 3) carries "s": every other record
            # stays as it was.
            if event.state is None:
                return {"t": EVENT_TAGS[Deleted], "j": event.local_id}
            return {"t": EVENT_TAGS[Deleted], "j": event.local_id, "s": event.state}
        case Collected():
            return {"t": EVENT_TAGS[Collected], "j": event.local_id}
        case Cancelled():
            return {"t": EVENT_TAGS[Cancelled], "j": event.local_id, "why": event.reason}
        case (
            QueueCreated()
            | QueueDeleted()
            | QueueResized()
            | PartitionsRetired()
            | PartitionPlaced()
            | PartitionMoved()
            | RecordSkipped()
            | QueuePaused()
            | ScheduleTicked()
            | FormatRaised()
        ):
            return _encode_catalog_event(event)


def _encode_catalog_event(event: CatalogEvent) -> dict[str, Any]:
    match event:
        case QueueCreated():
            return {"t": EVENT_TAGS[QueueCreated], "q": event.name, "n": event.partitions}
        case QueueDeleted():
            return {"t": EVENT_TAGS[QueueDeleted], "q": event.name}
        case QueueResized():
            return {
                "t": EVENT_TAGS[QueueResized],
                "q": event.name,
                "n": event.partitions,
                "why": event.reason,
            }
        case PartitionsRetired():
            return {
                "t": EVENT_TAGS[PartitionsRetired],
                "q": event.name,
                "p": event.first,
                "why": event.reason,
            }
        case PartitionPlaced():
            return {
                "t": EVENT_TAGS[PartitionPlaced],
                "q": event.name,
                "p": event.partition,
                "s": event.shard,
                "why": event.reason,
            }
        case PartitionMoved():
            return {
                "t": EVENT_TAGS[PartitionMoved],
                "q": event.name,
                "p": event.partition,
                "from": event.source,
                "s": event.shard,
                "o": event.offset,
            }
        case RecordSkipped():
            return {
                "t": EVENT_TAGS[RecordSkipped],
                "q": event.name,
                "p": event.partition,
                "o": event.offset,
                "why": event.reason,
            }
        case QueuePaused():
            return {
                "t": EVENT_TAGS[QueuePaused],
                "q": event.name,
                "on": event.paused,
                "why": event.reason,
            }
        case ScheduleTicked():
            return {
                "t": EVENT_TAGS[ScheduleTicked],
                "q": event.name,
                "s": event.schedule,
                "tick": event.tick_ms,
                "job": event.job,
            }
        case FormatRaised():
            return {"t": EVENT_TAGS[FormatRaised], "f": event.format}


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    # What JSON decodes to has exactly the type asked for: the common case, checked first
    # (a bool never passes as an int here: its class is bool).
    if value.__class__ is kind:
        return value
    try:
        value = obj[key]
    except KeyError:
        raise CodecError(f"{_what(obj)} lacks field {key!r}") from None
    # bool is an int in Python; a flag must not pass as a number or the reverse.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise CodecError(f"{_what(obj)} field {key!r} has type {type(value).__name__}")
    return value


def _what(obj: Mapping[str, Any]) -> str:
    """What an error names: only formatted when there is an error (every field of every
    event passes `_field`)."""
    return f"event {obj['t']!r}" if "t" in obj else "record"


def _opt(obj: Mapping[str, Any], key: str, kind: type) -> Any:
    if obj.get(key) is None:
        return None
    return _field(obj, key, kind)


_DECODERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    "enq": lambda o: Enqueued(
        body=_unb64(_field(o, "b", str)),
        priority=_field(o, "p", int),
        run_after=_field(o, "r", int),
        attempts_allowed=_field(o, "n", int),
        custom_status=_field(o, "s", str),
        imported_from=_opt(o, "i", str),
        unique_key=_opt(o, "k", str),
        unique_for_ms=_opt(o, "kf", int) or 0,
    ),
    "clm": lambda o: Claimed(local_id=_field(o, "j", int), claim=_field(o, "c", str)),
    "ok": lambda o: Succeeded(
        local_id=_field(o, "j", int), append_status=_field(o, "s", str), claim=_opt(o, "c", str)
    ),
    "fail": lambda o: Failed(
        local_id=_field(o, "j", int),
        retry_delay_ms=_field(o, "d", int),
        append_status=_field(o, "s", str),
        claim=_opt(o, "c", str),
    ),
    "ckpt": lambda o: Checkpointed(
        local_id=_field(o, "j", int),
        new_body=None if o.get("b") is None else _unb64(_field(o, "b", str)),
        move_to_pending=_field(o, "m", bool),
        run_after=_opt(o, "r", int),
        attempts_allowed=_opt(o, "n", int),
        prepend_status=_opt(o, "s", str),
        claim=_opt(o, "c", str),
    ),
    "tmo": lambda o: TimedOut(
        local_id=_field(o, "j", int), claim=_field(o, "c", str), touched_at=_field(o, "h", int)
    ),
    "rtry": lambda o: Retried(
        local_id=_field(o, "j", int),
        attempts_allowed=_field(o, "n", int),
        run_after=_field(o, "r", int),
    ),
    "del": lambda o: Deleted(local_id=_field(o, "j", int), state=_opt(o, "s", int)),
    "gc": lambda o: Collected(local_id=_field(o, "j", int)),
    "cncl": lambda o: Cancelled(local_id=_field(o, "j", int), reason=_field(o, "why", str)),
    "qnew": lambda o: QueueCreated(name=_field(o, "q", str), partitions=_field(o, "n", int)),
    "qdel": lambda o: QueueDeleted(name=_field(o, "q", str)),
    "qsize": lambda o: QueueResized(
        name=_field(o, "q", str), partitions=_field(o, "n", int), reason=_field(o, "why", str)
    ),
    "qret": lambda o: PartitionsRetired(
        name=_field(o, "q", str), first=_field(o, "p", int), reason=_field(o, "why", str)
    ),
    "qplace": lambda o: PartitionPlaced(
        name=_field(o, "q", str),
        partition=_field(o, "p", int),
        shard=_field(o, "s", str),
        reason=_field(o, "why", str),
    ),
    "qmove": lambda o: PartitionMoved(
        name=_field(o, "q", str),
        partition=_field(o, "p", int),
        source=_field(o, "from", str),
        shard=_field(o, "s", str),
        offset=_field(o, "o", int),
    ),
    "qskip": lambda o: RecordSkipped(
        name=_field(o, "q", str),
        partition=_field(o, "p", int),
        offset=_field(o, "o", int),
        reason=_field(o, "why", str),
    ),
    "qpause": lambda o: QueuePaused(
        name=_field(o, "q", str), paused=_field(o, "on", bool), reason=_field(o, "why", str)
    ),
    "stick": lambda o: ScheduleTicked(
        name=_field(o, "q", str),
        schedule=_field(o, "s", str),
        tick_ms=_field(o, "tick", int),
        job=_field(o, "job", str),
    ),
    "fmt": lambda o: FormatRaised(format=_field(o, "f", int)),
}


def encode(envelope: Envelope) -> bytes:
    actor = envelope.actor
    return orjson.dumps(
        {
            "v": VERSION,
            "at": envelope.at,
            "a": [actor.source, actor.request_id, actor.server],
            "e": [_encode_event(e) for e in envelope.events],
        }
    )


def event_sizes(events: Sequence[Event]) -> list[int]:
    """The bytes each event takes in an encoded envelope (its object, without the comma
    between events): what the writer cuts a call too big for one record by."""
    return [len(orjson.dumps(_encode_event(e))) for e in events]


def _decode_event(obj: Any) -> Event:
    if not isinstance(obj, dict):
        raise CodecError(f"an event must be an object, got {type(obj).__name__}")
    tag = obj.get("t")
    decoder = _DECODERS.get(tag) if isinstance(tag, str) else None
    if decoder is None:
        raise CodecError(f"unknown event type {tag!r}")
    return decoder(obj)


def decode(value: bytes) -> Envelope:
    """A record of one envelope (catalog records, and queue records of one part)."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"record value is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise CodecError("record value must be a JSON object")
    return _envelope(obj)


@dataclass(frozen=True, slots=True)
class Part:
    """One caller's envelope within a record: a group commit (ledger/group_commit.py)
    puts the envelopes of concurrent callers to one partition in one record, each with
    its own time, actor and trace context. `first` is the index of its first event in
    the record, so event i of the part is event `first + i` of the record (what an
    enqueued job's local id and a timeline row's idx are made of)."""

    envelope: Envelope
    traceparent: str | None
    first: int


def encode_part(envelope: Envelope, traceparent: str | None, value: bytes | None = None) -> bytes:
    """An envelope as a member of a group record: its trace context inside. `value` is
    `encode(envelope)` when the caller has it already."""
    if value is None:
        value = encode(envelope)
    if not traceparent:
        return value
    return value[:-1] + b',"tp":' + orjson.dumps(traceparent) + b"}"


def encode_group(parts: Sequence[bytes]) -> bytes:
    """A record of several envelopes (each from `encode_part`), in order."""
    return b"[" + b",".join(parts) + b"]"


def decode_parts(value: bytes, headers: Sequence[tuple[str, bytes]] | None) -> list[Part]:
    """Every envelope of a queue record: one for a plain record (its trace context in
    the headers), several for a group record (each with its own)."""
    if not value.startswith(b"["):
        return [Part(decode(value), traceparent_of(headers), 0)]
    try:
        items = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"record value is not JSON: {exc}") from None
    if not isinstance(items, list) or not items:
        raise CodecError("a group record must be a non-empty JSON array of envelopes")
    parts: list[Part] = []
    first = 0
    for obj in items:
        if not isinstance(obj, dict):
            raise CodecError("each envelope of a group record must be a JSON object")
        envelope = _envelope(obj)
        parts.append(Part(envelope, _opt(obj, "tp", str), first))
        first += len(envelope.events)
    return parts


def record_events(value: bytes, headers: Sequence[tuple[str, bytes]] | None) -> list[Event]:
    """Every event of a queue record in record order: event i is the one whose index
    (an enqueued job's local id is `offset * 1000 + i`) is i, whatever the parts."""
    return [e for part in decode_parts(value, headers) for e in part.envelope.events]


def _envelope(obj: dict[str, Any]) -> Envelope:
    # `type(...) is int`: JSON true and 1.0 compare equal to 1 in Python.
    if type(obj.get("v")) is not int or obj["v"] != VERSION:
        raise CodecError(
            f"record version {obj.get('v')!r} is not {VERSION}: written by another "
            "pinledger version; upgrade this one to read it"
        )
    actor = _field(obj, "a", list)
    if len(actor) != 3 or not all(isinstance(x, str) for x in actor):
        raise CodecError("record actor must be [source, request_id, server]")
    events: Sequence[Any] = _field(obj, "e", list)
    return Envelope(
        at=_field(obj, "at", int),
        actor=Actor(*actor),
        events=tuple(_decode_event(e) for e in events),
    )


def trace_headers(traceparent: str | None) -> Headers:
    """Record headers carrying the W3C trace context of the call that wrote a record."""
    return [] if not traceparent else [(TRACEPARENT_HEADER, traceparent.encode("ascii"))]


def traceparent_of(headers: Sequence[tuple[str, bytes]] | None) -> str | None:
    for key, value in headers or ():
        if key == TRACEPARENT_HEADER:
            return value.decode("ascii", errors="replace")
    return None
