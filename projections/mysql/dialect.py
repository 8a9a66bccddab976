"""The MariaDB/MySQL dialect of the SQL store (projections/sql/dialect.py): its
connection and pool (connection.py), its day partitions' DDL (day_partitions.py), its
sessions (session.py) and the few row and parameter shapes PyMySQL takes its own way.
Dialect differences: docs/decisions/0016-mysql-store.md."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pinledger.projections.mysql import rows
from pinledger.projections.mysql.connection import check_schema_name
from pinledger.projections.mysql.day_partitions import MyDayPartitions
from pinledger.projections.mysql.session import MySession
from pinledger.projections.sql.dialect import Params
from pinledger.projections.store import TimelineRow


class MyDialect(MyDayPartitions):
    kind = "mysql"
    # MariaDB has no COPY TO STDOUT: the verify's lines are formatted from rows.
    formats_lines = False

    @contextmanager
    def session(self, what: str, transaction: bool = False) -> Iterator[MySession]:
        with self.connection(what, transaction) as conn, conn.cursor() as cur:
            yield MySession(conn, cur)

    def check_schema_name(self, schema: str) -> str:
        return check_schema_name(schema)

    def pair_params(self, pairs: Sequence[tuple[Any, Any]], first: str, second: str) -> Params:
        # One list of tuples: `(a, b) IN %(pairs)s`.
        return {"pairs": list(pairs)}

    def partition_set(self, partitions: Sequence[int]) -> Any:
        # No arrays: `NOT FIND_IN_SET(partition, %(away)s)` on "1,3" ("" for none; an
        # empty list would render as `()`, which is not SQL).
        return ",".join(str(int(p)) for p in partitions)

    def timeline_row(self, row: Sequence[Any]) -> TimelineRow:
        return rows.timeline(row)
