"""Postgres rows to the store's named rows. The column order is shared with the MySQL
adapter (projections/columns.py); psycopg returns every type as the store wants it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinledger.projections.columns import event, held, job, looked_up, scanned, selected
from pinledger.projections.store import TimelineRow

__all__ = ["event", "held", "job", "looked_up", "scanned", "selected", "timeline"]


def timeline(row: Sequence[Any]) -> TimelineRow:
    return TimelineRow(*row)
