"""The replay's comparison of one table across two databases (`pinledger replay`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinledger.projections.mysql.connection import MyConnection, check_schema_name
from pinledger.projections.mysql.sql import query
from pinledger.projections.store import TableDiff


def _json_value(value: Any) -> Any:
    # Bytes as Postgres's to_jsonb prints a bytea, so both stores' reports read alike.
    return "\\x" + value.hex() if isinstance(value, bytes | bytearray) else value


class MyDiff(MyConnection):
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
        """Rows of `table` only here, only in `other_schema` (counts, then samples as
        dicts), among rows whose `queue_column` is in `queues` and, when `partition` is
        given, whose integer `partition_column` equals it."""
        check_schema_name(other_schema)
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
            with self.cursor(f"comparing {table} with database {other_schema}") as cur:
                cur.execute(query("diff_count", **names), params)
                count_row = cur.fetchone()
                cur.execute(query("diff_rows", **names), params)
                columns = [d[0] for d in cur.description or ()]
                found = [
                    {c: _json_value(v) for c, v in zip(columns, row, strict=True)}
                    for row in cur.fetchall()
                ]
            return (int(count_row[0]) if count_row else 0), found

        only_here, here_rows = one_way(self.schema, other_schema)
        only_there, there_rows = one_way(other_schema, self.schema)
        return TableDiff(only_here, only_there, here_rows, there_rows)
