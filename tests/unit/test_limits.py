"""ledger/limits.py against what reads it: both dialects' schemas hold the worst case of
every column the table names (the schemas read from their schema.sql files), the worst
verdicts, claims and timeline details the state machine and the owners make fit those
worst cases, and the checks themselves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import orjson
import pytest

from pinledger.ledger import limits
from pinledger.ledger.events import Actor, Checkpointed, Enqueued, Envelope, Failed, JobEvent
from pinledger.ledger.limits import Extent
from pinledger.ledger.state import Job, JobState, Stamp, evolve
from pinledger.projections.timeline_rows import timeline_row

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = {
    "postgres": ROOT / "projections" / "pg" / "schema.sql",
    "mysql": ROOT / "projections" / "mysql" / "schema.sql",
}

# What a column of each type holds: characters (None: no limit but the bytes) and
# bytes. Postgres: a field is at most 1 GB, a jsonb value 255 MB. MariaDB: TEXT is
# 65,535 bytes, VARCHAR(n) n characters of up to 4 bytes (utf8mb4), JSON a LONGTEXT.
_CAPACITY = {
    ("postgres", "text"): Extent(1 << 30, (1 << 30) - 1),
    ("postgres", "jsonb"): Extent(1 << 28, (1 << 28) - 1),
    ("mysql", "TEXT"): Extent(65_535, 65_535),
    ("mysql", "JSON"): Extent(1 << 32, (1 << 32) - 1),
    ("mysql", "LONGTEXT"): Extent(1 << 32, (1 << 32) - 1),
}


class Column(NamedTuple):
    type: str
    capacity: Extent | None  # None: not a text type


def read_schema(kind: str) -> dict[str, Column]:
    """ "table.column" -> its type and capacity, from a dialect's schema.sql."""
    text = re.sub(r"--[^\n]*", "", SCHEMAS[kind].read_text())
    columns: dict[str, Column] = {}
    for table, body in re.findall(r"CREATE TABLE (\w+) \((.*?)\n\)", text, re.DOTALL):
        for line in body.splitlines():
            found = re.match(r"\s+[`\"]?(\w+)[`\"]?\s+(\w+)(?:\((\d+)\))?", line)
            if found is None or found[1].upper() in {"PRIMARY", "CONSTRAINT", "INDEX"}:
                continue
            name, kind_of, size = found[1], found[2], found[3]
            if kind_of.upper() == "VARCHAR" and size is not None:
                capacity: Extent | None = Extent(int(size), 4 * int(size))
            else:
                capacity = _CAPACITY.get((kind, kind_of))
            columns[f"{table}.{name}"] = Column(kind_of, capacity)
    return columns


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_every_column_the_table_covers_holds_its_worst_case(kind: str) -> None:
    schema = read_schema(kind)
    assert "jobs.custom_status" in schema and "job_events.detail" in schema  # it parsed
    for column, worst in limits.column_extents().items():
        assert column in schema, f"limits.py names {column}, which {SCHEMAS[kind]} lacks"
        found = schema[column]
        assert found.capacity is not None, f"{kind} {column} is {found.type}: not text"
        assert worst.chars <= found.capacity.chars and worst.bytes <= found.capacity.bytes, (
            f"{kind} {column} ({found.type}) holds {found.capacity}, the worst case is {worst}"
        )


def test_the_schema_reader_sees_a_narrow_column() -> None:
    # What the test above would catch: MariaDB's TEXT under a verdict of sources 4x longer.
    schema = read_schema("mysql")
    assert schema["job_events.verdict"].capacity == Extent(65_535, 65_535)
    assert schema["imported_descriptors.old_descriptor"].capacity == Extent(400, 1600)
    assert 4 * limits.column_extents()["job_events.verdict"].bytes > 65_535


# -- the worst cases the code makes --------------------------------------------------------

# The characters that cost the most: in repr() a non-printable astral one ('\U000e0001',
# 10 bytes), in UTF-8 any astral one (4 bytes), in JSON a control character (\u001f).
REPR_WORST, UTF8_WORST, JSON_WORST = "\U000e0001", "\U0001f600", "\x1f"
SOURCE = REPR_WORST * limits.MAX_SOURCE_CHARS
OTHER = REPR_WORST * (limits.MAX_SOURCE_CHARS - 1) + UTF8_WORST
SERVER = UTF8_WORST * limits.MAX_SERVER_ID_CHARS
# server:started_ms:source:counter, with the largest numbers a claim can hold.
CLAIM = f"{SERVER}:{2**63 - 1}:{OTHER}:{2**63 - 1}"
T0 = 1_700_000_000_000


def _size(text: str) -> Extent:
    return Extent(len(text), len(text.encode()))


def _within(found: Extent, worst: Extent) -> bool:
    return found.chars <= worst.chars and found.bytes <= worst.bytes


def test_a_claim_fits_its_worst_case() -> None:
    assert len(CLAIM) <= limits.MAX_CLAIM_CHARS
    assert _within(_size(CLAIM), limits.column_extents()["jobs.claim"])


def test_the_longest_verdicts_fit_the_verdict_column() -> None:
    claimed = Job(0, 1, JobState.IN_PROGRESS, b"", 2, 2, "", T0, T0, T0, CLAIM, OTHER, T0)
    stamp = Stamp(T0, Actor(SOURCE, "r" * limits.MAX_REQUEST_ID_CHARS, SERVER))
    worst = limits.column_extents()["job_events.verdict"]
    verdicts = [
        evolve(claimed, Failed(0), stamp)[1],  # from 'source', but claimed by 'other' under
        evolve(claimed, Failed(0, claim=CLAIM + "x"), stamp)[1],  # stale claim, claimed by
        evolve(claimed, Checkpointed(0), stamp)[1],
    ]
    for verdict in verdicts:
        assert not verdict.applied
        assert _within(_size(str(verdict)), worst), (len(str(verdict)), worst)


def test_the_longest_timeline_details_fit_the_detail_column() -> None:
    status = JSON_WORST * limits.MAX_CUSTOM_STATUS
    events: list[JobEvent] = [
        Enqueued(b"x", 1, T0, 2, status, imported_from=JSON_WORST * 400),
        Checkpointed(0, prepend_status=status, claim=JSON_WORST * limits.MAX_CLAIM_CHARS),
        Failed(0, 2**63 - 1, status, claim=JSON_WORST * limits.MAX_CLAIM_CHARS),
    ]
    worst = limits.column_extents()["job_events.detail"]
    envelope = Envelope(T0, Actor(SOURCE, "r", SERVER), ())
    for event in events:
        row = timeline_row(
            0,
            0,
            0,
            envelope,
            event,
            None,
            None,
            evolve(None, event, Stamp(T0, envelope.actor), 0)[1],
        )
        detail = orjson.dumps(row.detail)
        assert len(detail) <= worst.bytes, (type(event).__name__, len(detail), worst)


# -- the checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("a\x00b", "contains NUL (\\x00) at character 1"),
        ("é\ud800", "unpaired surrogate"),
        ("\udfff", "unpaired surrogate"),
        (b"\xff", "is not valid UTF-8"),
        (7, "must be a str, got 7"),
        ("s" * (limits.MAX_SOURCE_CHARS + 1), "is 1025 characters, the limit is 1024"),
    ],
)
def test_what_a_rule_refuses_and_says(value: object, said: str) -> None:
    wrong = limits.problem(limits.SOURCE, value)
    assert wrong is not None and said in wrong


@pytest.mark.parametrize(
    "value", ["", "w:h", "é\U0001f600\U000e0001", "s" * limits.MAX_SOURCE_CHARS, "a\tb\n"]
)
def test_what_a_rule_takes(value: str) -> None:
    assert limits.problem(limits.SOURCE, value) is None


def test_a_truncating_rule_takes_any_length_and_a_body_takes_nul() -> None:
    assert limits.problem(limits.CUSTOM_STATUS, "s" * 10**6) is None
    assert limits.problem(limits.CUSTOM_STATUS, "s\x00") is not None
    assert limits.problem(limits.NEW_BODY, "a\x00b") is None
    assert limits.problem(limits.NEW_BODY, "a\ud800") is not None


def test_a_value_is_shown_cut() -> None:
    assert limits.shown("abc") == "'abc'"
    shown = limits.shown("x" * 10**6)
    assert len(shown) < 100 and shown.endswith("(1000000 in all)")
