"""Loads the Postgres store's named queries (queries.sql and the shared
projections/sql/queries.sql) and the numbered files of migrations/."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from psycopg import sql

from pinledger.projections.migration_plan import Migration, MigrationFileError, Mode
from pinledger.projections.sql.named_queries import load_migrations, with_shared

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


MODES = frozenset(Mode)

_CREATE_INDEX = re.compile(r"^CREATE\s+(?:UNIQUE\s+)?INDEX\b", re.IGNORECASE)
# The only CREATE INDEX a concurrent migration may hold: a rerun skips the index a run
# before it built, and the runner finds by its name one left INVALID by an interruption.
_CREATE_CONCURRENTLY = re.compile(
    r"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(?P<name>\w+)\s+ON\b",
    re.IGNORECASE,
)


def index_built(statement: str) -> str | None:
    """The name of the index a concurrent migration's statement builds, if it builds one."""
    found = _CREATE_CONCURRENTLY.match(statement)
    return found["name"] if found else None


def _check_concurrent(migration: Migration) -> None:
    """A concurrent migration runs statement by statement, each in its own implicit
    transaction, so its file must split at line-ending semicolons (no $$ bodies) and build
    indexes only in the form a rerun can repair."""
    if "$$" in migration.text:
        raise MigrationFileError(
            f"migration {migration.name}: a concurrent migration runs statement by "
            "statement and cannot hold a $$-quoted body; move it to an online migration"
        )
    for statement in migration.statements:
        if _CREATE_INDEX.match(statement) and not index_built(statement):
            raise MigrationFileError(
                f"migration {migration.name}: write CREATE INDEX CONCURRENTLY IF NOT EXISTS "
                f"<name> ON ... (a rerun must skip a built index and repair an invalid "
                f"one), not: {statement.splitlines()[0]}"
            )


def load(directory: Traversable) -> list[Migration]:
    """The numbered Postgres migrations of a folder, in order, each checked against the
    way it declares it runs."""
    found = load_migrations(directory, MODES)
    for migration in found:
        if migration.mode is Mode.CONCURRENTLY:
            _check_concurrent(migration)
    return found


@cache
def migrations() -> list[Migration]:
    """Every numbered migration of migrations/, in order."""
    return load(MIGRATIONS_DIR)
