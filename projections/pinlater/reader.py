"""Reads a PinLater MySQL deployment for `pinledger import-pinlater` (cli/
import_pinlater.py), and keeps the importer's map of what it imported there. Not a
store: a reader of PinLater's own databases, through the MySQL store's driver
connection helpers and its queries in pinlater.sql.

PinLater keeps the jobs of queue Q on shard S in the database `plq_<S>_<Q>`, one table
per priority, `jobs_p<priority>`, with the columns local_id, state, claim_descriptor,
attempts_allowed, attempts_remaining, custom_status, created_at, run_after, updated_at
and body. The importer adds one table to each such database, `pinledger_import`
(priority, local_id, descriptor): the jobs it imported and their new descriptors, so a
second run imports nothing twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

import pymysql
import pymysql.cursors

from pinledger.projections.mysql.connection import connect_args, store_error
from pinledger.projections.mysql.sql import fill
from pinledger.projections.sql.named_queries import parse

SQL_FILE = files("pinledger.projections.pinlater").joinpath("pinlater.sql")


@cache
def _queries() -> dict[str, str]:
    return parse(SQL_FILE)


def _query(name: str, **identifiers: str) -> str:
    """A named query of pinlater.sql, its database and table names quoted."""
    return fill(_queries()[name], **identifiers)


_DATABASE = re.compile(r"^plq_([A-Za-z0-9]+)_(\w+)$")
_TABLE = re.compile(r"^jobs_p([0-9]+)$")


@dataclass(frozen=True, slots=True)
class PinLaterShard:
    """One database of a PinLater deployment: one queue's jobs on one shard."""

    database: str
    shard: str
    queue: str
    priorities: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PinLaterJob:
    """One row of a jobs_p<priority> table, times in epoch ms."""

    local_id: int
    state: int
    claim_descriptor: str | None
    attempts_allowed: int
    attempts_remaining: int
    custom_status: str
    created_at: int
    run_after: int
    updated_at: int
    body: bytes


def _job(row: Sequence[Any]) -> PinLaterJob:
    local_id, state, claim, allowed, remaining, status, created, run_after, updated, body = row
    return PinLaterJob(
        local_id=int(local_id),
        state=int(state),
        claim_descriptor=claim,
        attempts_allowed=int(allowed or 0),
        attempts_remaining=int(remaining or 0),
        custom_status=status or "",
        created_at=int(created or 0),
        run_after=int(run_after or 0),
        updated_at=int(updated or 0),
        body=bytes(body or b""),
    )


class PinLaterSource:
    """A connection to the MySQL server of a PinLater deployment (the DSN's database
    part is ignored: every plq_* database of the server is read)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        args = connect_args(dsn) | {"autocommit": True, "charset": "utf8mb4", "database": None}
        try:
            self._conn = pymysql.connect(**args)
        except pymysql.Error as exc:
            raise store_error(exc, "connecting to the PinLater database", "-") from exc

    @contextmanager
    def _cursor(self, what: str) -> Iterator[pymysql.cursors.Cursor]:
        try:
            with self._conn.cursor() as cur:
                yield cur
        except pymysql.Error as exc:
            raise store_error(exc, what, "PinLater") from exc

    def close(self) -> None:
        self._conn.close()

    def shards(self, queues: Sequence[str] = ()) -> list[PinLaterShard]:
        """The deployment's plq_<shard>_<queue> databases (only those of `queues` when
        given), with the priorities of their jobs_p<priority> tables."""
        found = []
        with self._cursor("listing PinLater databases") as cur:
            cur.execute(_query("pinlater_databases"), {})
            databases = [str(row[0]) for row in cur.fetchall()]
            for database in databases:
                named = _DATABASE.match(database)
                if named is None or (queues and named.group(2) not in queues):
                    continue
                cur.execute(_query("pinlater_tables"), {"db": database})
                priorities = tuple(
                    sorted(
                        int(m.group(1))
                        for m in (_TABLE.match(str(row[0])) for row in cur.fetchall())
                        if m
                    )
                )
                found.append(PinLaterShard(database, named.group(1), named.group(2), priorities))
        return found

    def count(self, shard: PinLaterShard, priority: int) -> int:
        names = {"db": shard.database, "table": f"jobs_p{priority}"}
        with self._cursor("counting PinLater jobs") as cur:
            cur.execute(_query("count_jobs", **names), {})
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def prepare(self, shard: PinLaterShard) -> None:
        """Create the importer's map table in the shard's database (when missing)."""
        with self._cursor("creating the import map") as cur:
            cur.execute(_query("create_import_map", db=shard.database))

    def pending_range(self, shard: PinLaterShard, priority: int) -> tuple[int, int] | None:
        """The smallest and largest local_id of a priority's jobs not imported yet (None:
        there are none)."""
        names = {"db": shard.database, "table": f"jobs_p{priority}"}
        with self._cursor("reading PinLater's local ids") as cur:
            cur.execute(_query("pending_range", **names), {"priority": priority})
            row = cur.fetchone()
        if row is None or row[0] is None:
            return None
        return int(row[0]), int(row[1])

    def pending_among(self, shard: PinLaterShard, priority: int, ids: Sequence[int]) -> list[int]:
        """Which of `ids` are local ids of the priority's jobs not imported yet."""
        names = {"db": shard.database, "table": f"jobs_p{priority}"}
        found: list[int] = []
        with self._cursor("reading PinLater's local ids") as cur:
            for i in range(0, len(ids), 1000):
                params = {"priority": priority, "ids": list(ids[i : i + 1000])}
                cur.execute(_query("pending_among", **names), params)
                found += [int(row[0]) for row in cur.fetchall()]
        return found

    def jobs(
        self, shard: PinLaterShard, priority: int, after: int, limit: int, upto: int
    ) -> list[PinLaterJob]:
        """Up to `limit` jobs of one priority with `after` < local_id <= `upto` not
        imported yet, by local_id."""
        names = {"db": shard.database, "table": f"jobs_p{priority}"}
        params = {"priority": priority, "after": after, "upto": upto, "limit": limit}
        with self._cursor("reading PinLater jobs") as cur:
            cur.execute(_query("jobs_to_import", **names), params)
            return [_job(row) for row in cur.fetchall()]

    def record(self, shard: PinLaterShard, priority: int, imported: dict[int, str]) -> None:
        """Remember which jobs were imported, as which descriptors."""
        rows = [
            {"priority": priority, "local_id": local_id, "descriptor": descriptor}
            for local_id, descriptor in imported.items()
        ]
        if not rows:
            return
        with self._cursor("recording imported jobs") as cur:
            cur.executemany(_query("record_import", db=shard.database), rows)

    def imported_as(self, shard: PinLaterShard, priority: int, local_id: int) -> str | None:
        """The pinledger descriptor a PinLater job was imported as (None: not imported)."""
        params = {"priority": priority, "local_id": local_id}
        with self._cursor("reading the import map") as cur:
            cur.execute(_query("imported_descriptor", db=shard.database), params)
            row = cur.fetchone()
        return None if row is None else str(row[0])
