"""Loads the named queries of queries.sql, the one place pinledger's SQL lives."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from psycopg import sql

QUERIES_FILE = Path(__file__).with_name("queries.sql")
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

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
    for path in sorted(MIGRATIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        found.append((int(path.name[:4]), path.name, path.read_text(encoding="utf-8")))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"{MIGRATIONS_DIR}: two migrations share a number: {versions}")
    return found
