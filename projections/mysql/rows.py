"""What PyMySQL returns and takes differently from the store's rows (the column order is
projections/row_mapping.py's): BOOLEAN comes back as 0/1 and JSON as text, and the
timeline's detail goes in as JSON text (row_mapping.event_params, shared with Postgres's
pipelined inserts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from pinledger.projections.store import TimelineRow


def timeline(row: Sequence[Any]) -> TimelineRow:
    values = list(row)
    values[8] = bool(values[8])  # applied
    values[12] = orjson.loads(values[12])  # detail
    return TimelineRow(*values)
