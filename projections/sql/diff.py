"""The replay's comparison of one table across two schemas (`pinledger replay`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinledger.projections.sql.base import SqlBase
from pinledger.projections.store import TableDiff


class SqlDiff(SqlBase):
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
        self.dialect.check_schema_name(other_schema)
        if not queues:
            return TableDiff(0, 0, [], [])
        params = {"queues": list(queues), "partition": partition, "limit": limit}

        def one_way(left: str, right: str) -> tuple[int, list[Any]]:
            names = {
                "left": left,
                "right": right,
                "table": table,
                "queue_column": queue_column,
                "partition_column": partition_column,
            }
            what = f"comparing {table} with {other_schema}"
            with self.dialect.session(what) as session:
                count = session.fetchall("diff_count", params, **names)
                samples = session.samples("diff_rows", params, **names)
            return (int(count[0][0]) if count else 0), samples

        only_here, here_rows = one_way(self.schema, other_schema)
        only_there, there_rows = one_way(other_schema, self.schema)
        return TableDiff(only_here, only_there, here_rows, there_rows)
