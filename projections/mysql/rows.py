"""What PyMySQL returns and takes differently from the store's rows (the column order is
projections/row_mapping.py's): BOOLEAN comes back as 0/1 and JSON as text, and the
timeline's detail goes in as JSON text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from pinledger.projections.store import EventRow, TimelineRow


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
