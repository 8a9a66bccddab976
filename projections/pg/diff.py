"""The replay's comparison of one table across two schemas (`pinledger replay`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinledger.projections.pg.connection import PgConnection
from pinledger.projections.pg.sql import composed
from pinledger.projections.store import TableDiff


class PgDiff(PgConnection):
    def diff(
        self,
        *,
        other_schema: str,
        table: str,
        queue_column: str,
        partition_column: str,
        queues: Sequence[str],
        partition: int | None,
        limit: int,
    ) -> TableDiff:
        """Rows of `table` only here, only in `other_schema` (counts, then samples),
        among rows whose `queue_column` is in `queues` and, when `partition` is given,
        whose integer `partition_column` equals it."""
        params = {"queues": list(queues), "partition": partition, "limit": limit}

        def one_way(left: str, right: str) -> tuple[int, list[Any]]:
            names = {
                "left": left,
                "right": right,
                "table": table,
                "queue_column": queue_column,
                "partition_column": partition_column,
            }
            with self.connection(f"comparing {table} with schema {other_schema}") as conn:
                count_row = conn.execute(composed("diff_count", **names), params).fetchone()
                found = conn.execute(composed("diff_rows", **names), params).fetchall()
            return (int(count_row[0]) if count_row else 0), [r[0] for r in found]

        only_here, here_rows = one_way(self.schema, other_schema)
        only_there, there_rows = one_way(other_schema, self.schema)
        return TableDiff(only_here, only_there, here_rows, there_rows)
