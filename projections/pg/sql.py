"""Loads the named queries of queries.sql, the one place pinledger's SQL lives."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from psycopg import sql

# Package data, found through importlib.resources so a wheel installed outside the
# checkout has them too (docs/decisions/0009-package-layout.md).
QUERIES_FILE = files("pinledger.projections.pg").joinpath("queries.sql")
MIGRATIONS_DIR = files("pinledger.migrations")

_MIGRATION = re.compile(r"^[0-9]{4}_.*\.sql$")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    text = QUERIES_FILE.read_text(encoding="utf-8")
    parts = _NAME.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"{QUERIES_FILE}: query {name!r} is defined twice")
        statement = "\n".join(
            line for line in body.strip().splitlines() if not line.startswith("--")
        ).strip()
        found[name] = statement.rstrip(";")
    return found


def query(name: str) -> sql.SQL:
    """A named query; literal braces are not used, so composition is safe."""
    return sql.SQL(queries()[name])


def composed(name: str, **identifiers: str) -> sql.Composed:
    """A named query with identifiers (schemas, tables, columns) filled in safely."""
    return query(name).format(**{k: sql.Identifier(v) for k, v in identifiers.items()})


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, text) of every numbered migration, in order."""
    found = []
    names = sorted(entry.name for entry in MIGRATIONS_DIR.iterdir() if _MIGRATION.match(entry.name))
    for name in names:
        text = MIGRATIONS_DIR.joinpath(name).read_text(encoding="utf-8")
        found.append((int(name[:4]), name, text))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"{MIGRATIONS_DIR}: two migrations share a number: {versions}")
    return found
