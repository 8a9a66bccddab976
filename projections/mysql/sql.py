"""Loads the named queries of queries.sql, the one place the MySQL store's SQL lives,
and the numbered files of migrations/mysql/."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

# Package data, found through importlib.resources so a wheel installed outside the
# checkout has them too (docs/decisions/0009-package-layout.md).
PACKAGE = files("pinledger.projections.mysql")
QUERIES_FILE = PACKAGE.joinpath("queries.sql")
MIGRATIONS_DIR = files("pinledger.migrations.mysql")

_MIGRATION = re.compile(r"^[0-9]{4}_.*\.sql$")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_IDENTIFIER = re.compile(r"\{(\w+)\}")
# A statement ends with a semicolon at the end of a line.
_END = re.compile(r";\s*$", re.MULTILINE)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


@cache
def queries(file: str = "queries.sql") -> dict[str, str]:
    """The named queries of one .sql file of this package: queries.sql (the store's),
    pinlater.sql (the PinLater importer's reads of a PinLater database)."""
    path = PACKAGE.joinpath(file)
    text = path.read_text(encoding="utf-8")
    parts = _NAME.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"{path}: query {name!r} is defined twice")
        found[name] = _strip_comments(body).strip().rstrip(";")
    return found


def quote(name: str) -> str:
    """An identifier in backticks. Callers pass only names they checked (schema names,
    partition names they made, table and column names of the code)."""
    return "`" + name.replace("`", "``") + "`"


def query(name: str, file: str = "queries.sql", **identifiers: str) -> str:
    """A named query, with {identifier} placeholders filled in (quoted)."""
    text = queries(file)[name]
    if not identifiers:
        return text
    return _IDENTIFIER.sub(
        lambda m: quote(identifiers[m.group(1)]) if m.group(1) in identifiers else m.group(0),
        text,
    )


def fragment(name: str, **values: str) -> str:
    """A named piece of DDL with placeholders filled in as given (already quoted
    identifiers or integers): partition definitions, which DDL cannot take as
    parameters."""
    return _IDENTIFIER.sub(lambda m: values[m.group(1)], queries()[name])


def split_statements(text: str) -> list[str]:
    """The statements of a .sql file of DDL (a migration, schema.sql), comments out."""
    return [s.strip() for s in _END.split(_strip_comments(text)) if s.strip()]


def migrations() -> list[tuple[int, str, list[str]]]:
    """(version, file name, statements) of every numbered migration, in order."""
    found = []
    names = sorted(entry.name for entry in MIGRATIONS_DIR.iterdir() if _MIGRATION.match(entry.name))
    for name in names:
        statements = split_statements(MIGRATIONS_DIR.joinpath(name).read_text(encoding="utf-8"))
        found.append((int(name[:4]), name, statements))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"{MIGRATIONS_DIR}: two migrations share a number: {versions}")
    return found
