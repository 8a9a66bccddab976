"""Loads the MySQL store's named queries (queries.sql and the shared
projections/sql/queries.sql) and the numbered files of migrations/mysql/, and fills in
the identifiers PyMySQL cannot take as parameters."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from pinledger.projections.sql.named_queries import numbered, strip_comments, with_shared

PACKAGE = files("pinledger.projections.mysql")
QUERIES_FILE = PACKAGE.joinpath("queries.sql")
MIGRATIONS_DIR = files("pinledger.migrations.mysql")

_IDENTIFIER = re.compile(r"\{(\w+)\}")
# A statement ends with a semicolon at the end of a line.
_END = re.compile(r";\s*$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    return with_shared(QUERIES_FILE)


def quote(name: str) -> str:
    """An identifier in backticks. Callers pass only names they checked (schema names,
    partition names they made, table and column names of the code)."""
    return "`" + name.replace("`", "``") + "`"


def fill(text: str, **identifiers: str) -> str:
    """A statement with its {identifier} placeholders filled in (quoted)."""
    if not identifiers:
        return text
    return _IDENTIFIER.sub(
        lambda m: quote(identifiers[m.group(1)]) if m.group(1) in identifiers else m.group(0),
        text,
    )


def query(name: str, **identifiers: str) -> str:
    """A named query, with {identifier} placeholders filled in (quoted)."""
    return fill(queries()[name], **identifiers)


def fragment(name: str, **values: str) -> str:
    """A named piece of DDL with placeholders filled in as given (already quoted
    identifiers or integers): partition definitions, which DDL cannot take as
    parameters."""
    return _IDENTIFIER.sub(lambda m: values[m.group(1)], queries()[name])


def split_statements(text: str) -> list[str]:
    """The statements of a .sql file of DDL (a migration, schema.sql), comments out."""
    return [s.strip() for s in _END.split(strip_comments(text)) if s.strip()]


def migrations() -> list[tuple[int, str, list[str]]]:
    """(version, file name, statements) of every numbered migration, in order."""
    return [(v, name, split_statements(text)) for v, name, text in numbered(MIGRATIONS_DIR)]
