"""The verify's canonical text of a row (projections/verify.py): one line per `jobs` or
`job_events` row, exactly as Postgres's `COPY ... TO STDOUT` (text format) prints the
columns of the `job_lines` and `event_lines` queries. Postgres streams its rows in this
form from C; the log's fold formats the rows it expects the same way, and the two sides
compare as bytes. The MySQL store and the fake format their rows with these functions,
so every store speaks the same lines (tests/contract checks that Postgres's output and
these functions agree).

The format: columns separated by a tab; NULL as \\N; booleans t/f; integers in decimal;
text with backslash, backspace, form feed, newline, carriage return, tab and vertical
tab escaped by a backslash; bytea as \\x and hex (its backslash escaped in turn); jsonb
as Postgres prints it (object keys shortest first, then bytewise; ", " and ": ").
"""

from __future__ import annotations

import json
import re
from typing import Any

from pinledger.ledger.state import Job
from pinledger.projections.store import EventRow

# Columns of a line, in order (the key columns first: a merge orders lines by them).
EVENT_COLUMNS = (
    "offset",
    "idx",
    "local_id",
    "at",
    "type",
    "source",
    "request_id",
    "server",
    "claim",
    "applied",
    "verdict",
    "state_after",
    "attempts_remaining_after",
    "detail",
    "traceparent",
)
JOB_COLUMNS = (
    "local_id",
    "priority",
    "state",
    "body",
    "attempts_allowed",
    "attempts_remaining",
    "custom_status",
    "created_at",
    "run_after",
    "updated_at",
    "claim",
    "claim_source",
    "touched_at",
    "traceparent",
)

_COPY_SPECIAL = re.compile(r"[\\\x08\x0c\n\r\t\x0b]")
_COPY_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "\x08": "\\b",
        "\x0c": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\x0b": "\\v",
    }
)
_JSON_SPECIAL = re.compile(r'[\x00-\x1f"\\]')
_UNESCAPES = {"b": "\x08", "f": "\x0c", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
_ESCAPED = re.compile(r"\\(.)")


def _text(value: str | None) -> str:
    if value is None:
        return "\\N"
    return value.translate(_COPY_ESCAPES) if _COPY_SPECIAL.search(value) else value


def _number(value: int | None) -> str:
    return "\\N" if value is None else str(value)


def _json_string(value: str) -> str:
    if _JSON_SPECIAL.search(value):
        return json.dumps(value, ensure_ascii=False)
    return f'"{value}"'


def json_text(value: Any) -> str:
    """A JSON value as Postgres prints a jsonb."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return "{" + ", ".join(f"{_json_string(k)}: {json_text(value[k])}" for k in keys) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json_text(v) for v in value) + "]"
    return json.dumps(value)


def detail_text(detail: dict[str, Any]) -> str:
    """An event's detail (a flat object of integers, strings and booleans) as Postgres
    prints the jsonb: the common case of json_text, without its recursion. Many events
    share a detail (the acks of a batch, jobs enqueued alike): the text is remembered."""
    items = tuple(detail.items())
    text = _DETAILS.get(items)
    if text is None:
        if len(_DETAILS) >= _DETAILS_KEPT:
            _DETAILS.clear()
        text = _DETAILS[items] = _detail_text(detail)
    return text


# Detail texts remembered (bounded: forgotten all at once when full). Keyed by the items:
# True == 1 as a key, but a detail field has one type (an event's field's), so a key
# never holds a boolean in one detail and an integer in another.
_DETAILS: dict[tuple[tuple[str, Any], ...], str] = {}
_DETAILS_KEPT = 4096


def _detail_text(detail: dict[str, Any]) -> str:
    keys = _KEY_ORDER.get(tuple(detail))
    if keys is None:
        keys = _KEY_ORDER[tuple(detail)] = tuple(
            sorted(detail, key=lambda k: (len(k.encode()), k.encode()))
        )
    parts = []
    for key in keys:
        value = detail[key]
        if value.__class__ is str:
            parts.append(f'"{key}": {_json_string(value)}')
        elif value.__class__ is int:
            parts.append(f'"{key}": {value}')
        else:
            parts.append(f"{_json_string(key)}: {json_text(value)}")
    return "{" + ", ".join(parts) + "}"


# The order Postgres prints an object's keys in, per set of keys (events have a few).
_KEY_ORDER: dict[tuple[str, ...], tuple[str, ...]] = {}


def event_line(row: EventRow) -> bytes:
    detail = detail_text(row.detail)
    claim, traceparent = row.claim, row.traceparent
    texts = (row.type, row.source, row.request_id, row.server, row.verdict, detail)
    if (
        _COPY_SPECIAL.search("".join(texts))
        or (claim is not None and _COPY_SPECIAL.search(claim))
        or (traceparent is not None and _COPY_SPECIAL.search(traceparent))
    ):
        return _escaped_event_line(row, detail)
    state_after, remaining = row.state_after, row.attempts_remaining_after
    return (
        f"{row.offset}\t{row.idx}\t{row.local_id}\t{row.at}\t{row.type}\t{row.source}\t"
        f"{row.request_id}\t{row.server}\t{_NULL if claim is None else claim}\t"
        f"{'t' if row.applied else 'f'}\t{row.verdict}\t"
        f"{_NULL if state_after is None else state_after}\t"
        f"{_NULL if remaining is None else remaining}\t{detail}\t"
        f"{_NULL if traceparent is None else traceparent}"
    ).encode()


_NULL = "\\N"


def _escaped_event_line(row: EventRow, detail: str) -> bytes:
    return "\t".join(
        (
            str(row.offset),
            str(row.idx),
            str(row.local_id),
            str(row.at),
            _text(row.type),
            _text(row.source),
            _text(row.request_id),
            _text(row.server),
            _text(row.claim),
            "t" if row.applied else "f",
            _text(row.verdict),
            _number(row.state_after),
            _number(row.attempts_remaining_after),
            _text(detail),
            _text(row.traceparent),
        )
    ).encode()


def job_line(job: Job, traceparent: str | None) -> bytes:
    return "\t".join(
        (
            str(job.local_id),
            str(job.priority),
            str(int(job.state)),
            "\\\\x" + job.body.hex(),
            str(job.attempts_allowed),
            str(job.attempts_remaining),
            _text(job.custom_status),
            str(job.created_at),
            str(job.run_after),
            str(job.updated_at),
            _text(job.claim),
            _text(job.claim_source),
            _number(job.touched_at),
            _text(traceparent),
        )
    ).encode()


def _unescape(field: str) -> str | None:
    if field == "\\N":
        return None
    return _ESCAPED.sub(lambda m: _UNESCAPES.get(m.group(1), m.group(1)), field)


def columns(line: bytes, names: tuple[str, ...]) -> dict[str, str | None]:
    """A line's columns by name, as text (a difference's sample)."""
    fields = line.decode().split("\t")
    return {name: _unescape(field) for name, field in zip(names, fields, strict=True)}


def leading_ints(line: bytes, count: int) -> tuple[int, ...]:
    """The first `count` columns of a line as integers (its key)."""
    return tuple(int(field) for field in line.split(b"\t", count)[:count])
