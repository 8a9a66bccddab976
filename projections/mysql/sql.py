"""Loads the MySQL store's named queries (queries.sql and the shared
projections/sql/queries.sql) and the numbered files of migrations/mysql/, and fills in
the identifiers PyMySQL cannot take as parameters."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from pinledger.projections.migration_plan import Migration, Mode
from pinledger.projections.sql.named_queries import load_migrations, with_shared

PACKAGE = files("pinledger.projections.mysql")
QUERIES_FILE = PACKAGE.joinpath("queries.sql")
MIGRATIONS_DIR = files("pinledger.migrations.mysql")

_IDENTIFIER = re.compile(r"\{(\w+)\}")


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


# MariaDB has no CONCURRENTLY: what is online there says ALGORITHM=INPLACE, LOCK=NONE
# (decision 0024), and runs as any online migration does.
MODES = frozenset({Mode.ONLINE, Mode.PAUSE})


@cache
def migrations() -> list[Migration]:
    """Every numbered migration of migrations/mysql/, in order (each runs statement by
    statement: MariaDB commits each DDL statement on its own)."""
    return load_migrations(MIGRATIONS_DIR, MODES)
