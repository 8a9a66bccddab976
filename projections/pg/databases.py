"""Another database on a Postgres server, as a second store shard on one machine (the
integration tests of a shard map, `python -m bench.move`)."""

from __future__ import annotations

import psycopg

from pinledger.projections.pg.sql import composed, query


def sibling_database(dsn: str, name: str) -> str:
    """The DSN of database `name` on `dsn`'s server, created there when missing (the
    role must be allowed to create databases, as the stack's is)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not conn.execute(query("database_exists"), {"name": name}).fetchone():
            conn.execute(composed("create_database", database=name))
    head, _, _ = dsn.rpartition("/")
    return f"{head}/{name}"
