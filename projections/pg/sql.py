"""Loads the Postgres store's named queries (queries.sql and the shared
projections/sql/queries.sql) and the numbered files of migrations/."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from psycopg import sql

from pinledger.projections.sql.named_queries import numbered, with_shared

QUERIES_FILE = files("pinledger.projections.pg").joinpath("queries.sql")
MIGRATIONS_DIR = files("pinledger.migrations")


@cache
def queries() -> dict[str, str]:
    return with_shared(QUERIES_FILE)


def query(name: str) -> sql.SQL:
    """A named query; literal braces are not used, so composition is safe."""
    return sql.SQL(queries()[name])


def composed(name: str, **identifiers: str) -> sql.Composed:
    """A named query with identifiers (schemas, tables, columns) filled in safely."""
    return query(name).format(**{k: sql.Identifier(v) for k, v in identifiers.items()})


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, text) of every numbered migration, in order."""
    return numbered(MIGRATIONS_DIR)
