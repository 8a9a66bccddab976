"""MariaDB rows to the store's named rows and back. The column order is shared with the
Postgres adapter (projections/columns.py); here is what the driver returns differently
(BOOLEAN comes back as 0/1, JSON as text) and the parameters of the writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from pinledger.ledger.state import Job
from pinledger.projections.columns import event, held, job, looked_up, scanned, selected
from pinledger.projections.store import EventRow, TimelineRow

__all__ = [
    "event",
    "event_params",
    "held",
    "job",
    "job_params",
    "looked_up",
    "scanned",
    "selected",
    "timeline",
]


def timeline(row: Sequence[Any]) -> TimelineRow:
    values = list(row)
    values[8] = bool(values[8])  # applied
    values[12] = orjson.loads(values[12])  # detail
    return TimelineRow(*values)


def event_params(queue: str, partition: int, row: EventRow) -> dict[str, Any]:
    return {
        "queue": queue,
        "partition": partition,
        "local_id": row.local_id,
        "offset": row.offset,
        "idx": row.idx,
        "type": row.type,
        "at": row.at,
        "source": row.source,
        "request_id": row.request_id,
        "server": row.server,
        "claim": row.claim,
        "applied": row.applied,
        "verdict": row.verdict,
        "state_after": row.state_after,
        "attempts_remaining_after": row.attempts_remaining_after,
        "detail": orjson.dumps(row.detail).decode(),
        "traceparent": row.traceparent,
    }


def job_params(queue: str, partition: int, job: Job, traceparent: str | None) -> dict[str, Any]:
    return {
        "queue": queue,
        "partition": partition,
        "local_id": job.local_id,
        "priority": job.priority,
        "state": int(job.state),
        "body": job.body,
        "attempts_allowed": job.attempts_allowed,
        "attempts_remaining": job.attempts_remaining,
        "custom_status": job.custom_status,
        "created_at": job.created_at,
        "run_after": job.run_after,
        "updated_at": job.updated_at,
        "claim": job.claim,
        "claim_source": job.claim_source,
        "touched_at": job.touched_at,
        "traceparent": traceparent,
    }
