"""FakeStore's row rules: the CHECKs of projections/pg/schema.sql, the text both real
stores refuse, body regexes as Postgres matches them, and the replay's diff of two
tables."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pinledger.ledger.state import Job, JobState
from pinledger.projections.actions import EVENT_TYPES
from pinledger.projections.store import (
    EventRow,
    InvalidRegexError,
    QueueRow,
    ScheduleTick,
    StoreError,
    TableDiff,
)

JobKey = tuple[str, int, int]  # queue, partition, local_id
EventKey = tuple[str, int, int, int, int]  # ... offset, idx
ImportedRow = tuple[int, int, int]  # partition, local_id, priority


def escaped_body(body: bytes) -> str:
    """The body as Postgres's encode(body, 'escape') reads it for a regex match."""
    out = []
    for b in body:
        if b == 0 or b >= 0x80:
            out.append(f"\\{b:03o}")
        elif b == 0x5C:
            out.append("\\\\")
        else:
            out.append(chr(b))
    return "".join(out)


def compile_regex(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise InvalidRegexError(f"invalid body regex {regex!r}: {exc}") from None


# MariaDB's TEXT (projections/mysql/schema.sql): a longer value is "Data too long".
TEXT_BYTES = 65_535


def text_problem(value: str, max_bytes: int | None = TEXT_BYTES) -> str | None:
    """Why a text value would be refused by one of the real stores, as they refuse it
    (tests/contract/test_store_contract.py): a NUL by Postgres (text and jsonb), an
    unpaired surrogate by both drivers, over `max_bytes` by MariaDB (None: a JSON
    column, whose LONGTEXT holds gigabytes); None when both would take it."""
    if "\x00" in value:
        return "holds NUL (\\x00), which Postgres cannot store"
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            return "holds an unpaired surrogate: it is not UTF-8"
    if max_bytes is not None and size > max_bytes:
        return f"is {size} bytes, over MariaDB's TEXT ({max_bytes})"
    return None


def _check_texts(what: str, columns: Mapping[str, str | None]) -> None:
    for column, value in columns.items():
        wrong = None if value is None else text_problem(value)
        if wrong is not None:
            raise StoreError(f"the store refused {what}: {column} {wrong}")


def _json_texts(value: Any) -> Iterator[str]:
    """Every string of a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _json_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_texts(item)


def check_job(job: Job, queue: str = "") -> None:
    """The CHECKs of the jobs table (projections/pg/schema.sql), and its text."""
    _check_texts(
        f"job {job.local_id}",
        {
            "queue": queue,
            "custom_status": job.custom_status,
            "claim": job.claim,
            "claim_source": job.claim_source,
        },
    )
    claimed = job.claim is not None
    if not (
        0 <= job.attempts_remaining <= job.attempts_allowed
        and (job.state is JobState.IN_PROGRESS) == claimed
        and claimed == (job.touched_at is not None) == (job.claim_source is not None)
    ):
        raise StoreError(f"the store refused job {job.local_id}: it breaks a CHECK: {job}")


def check_event(row: EventRow, queue: str = "") -> None:
    """The CHECKs of the job_events table, and its text (the detail's a JSON column,
    where Postgres refuses NUL too)."""
    _check_texts(
        f"event row {row.local_id}@{row.offset}",
        {
            "queue": queue,
            "source": row.source,
            "request_id": row.request_id,
            "server": row.server,
            "claim": row.claim,
            "verdict": row.verdict,
            "traceparent": row.traceparent,
        },
    )
    for text in _json_texts(row.detail):
        wrong = text_problem(text, max_bytes=None)
        if wrong is not None:
            raise StoreError(
                f"the store refused event row {row.local_id}@{row.offset}: its detail {wrong}"
            )
    if not (
        row.type in EVENT_TYPES
        and (row.state_after is None or 0 <= row.state_after <= 3)
        and (row.state_after is None) == (row.attempts_remaining_after is None)
        and row.applied == (row.verdict == "applied")
    ):
        raise StoreError(f"the store refused event row {row}: it breaks a CHECK")


def listed(job: Job, body: bytes = b"") -> Job:
    """A job as lookups and scans return it: no claim source or touch time."""
    return job._replace(body=body, claim_source=None, touched_at=None)


def table_rows(
    table: str,
    schema: str,
    queues: Mapping[str, QueueRow],
    jobs: Mapping[JobKey, tuple[Job, str | None]],
    events: Mapping[EventKey, EventRow],
    imported: Mapping[tuple[str, str], ImportedRow],
    skipped: Mapping[tuple[str, int], Mapping[int, str]] | None = None,
    ticks: Mapping[tuple[str, str], ScheduleTick] | None = None,
) -> list[dict[str, Any]]:
    """A table's rows as column -> value, as Postgres's to_jsonb writes them."""
    if table == "queues":
        return [dataclasses.asdict(q) for q in queues.values()]
    if table == "jobs":
        return [
            {"queue": k[0], "partition": k[1], **_job_columns(job), "traceparent": tp}
            for k, (job, tp) in jobs.items()
        ]
    if table == "job_events":
        return [{"queue": k[0], "partition": k[1], **row._asdict()} for k, row in events.items()]
    if table == "imported_descriptors":
        return [
            {
                "queue": queue,
                "old_descriptor": old,
                "partition": partition,
                "local_id": local_id,
                "priority": priority,
            }
            for (queue, old), (partition, local_id, priority) in imported.items()
        ]
    if table == "skipped_records":
        return [
            {"queue": queue, "partition": partition, "record_offset": offset, "reason": reason}
            for (queue, partition), offsets in (skipped or {}).items()
            for offset, reason in offsets.items()
        ]
    if table == "schedule_ticks":
        return [
            {
                "queue": t.queue,
                "schedule": t.schedule,
                "tick_ms": t.tick_ms,
                "job": t.job,
                "at_ms": t.at,
            }
            for t in (ticks or {}).values()
        ]
    raise StoreError(f"no table {table!r} in schema {schema}")


def diff_rows(
    here: list[dict[str, Any]],
    there: list[dict[str, Any]],
    compared: Callable[[dict[str, Any]], bool],
    limit: int,
) -> TableDiff:
    """Rows only here and only there (as multisets, like EXCEPT ALL)."""

    def counted(rows: list[dict[str, Any]]) -> Counter[str]:
        return Counter(repr(sorted(row.items())) for row in rows if compared(row))

    mine, theirs = counted(here), counted(there)
    only_here, only_there = mine - theirs, theirs - mine
    return TableDiff(
        sum(only_here.values()),
        sum(only_there.values()),
        list(only_here.elements())[:limit],
        list(only_there.elements())[:limit],
    )


def _job_columns(job: Job) -> dict[str, Any]:
    columns = job._asdict()
    columns["state"] = int(job.state)
    return columns
