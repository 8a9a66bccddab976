"""Named queries and numbered migrations as package data: the one reader of the .sql
files of both dialects (docs/decisions/0009-package-layout.md: found through
importlib.resources, so a wheel installed outside the checkout has them too).

A queries file is blocks that start with `-- name: <name>`; the comment lines of a block
describe it and are left out of the statement. A dialect's queries are its own file
plus projections/sql/queries.sql, the statements both databases spell alike.
"""

from __future__ import annotations

import re
from importlib.resources import files
from importlib.resources.abc import Traversable

from pinledger.projections.migration_plan import Migration, Mode, declaration

SHARED_FILE = files("pinledger.projections.sql").joinpath("queries.sql")

_MIGRATION = re.compile(r"^[0-9]{4}_.*\.sql$")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# A statement of a DDL file ends with a semicolon at the end of a line.
_END = re.compile(r";\s*$", re.MULTILINE)


def strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def split_statements(text: str) -> list[str]:
    """The statements of a .sql file of DDL (a migration, schema.sql), comments out."""
    return [s.strip() for s in _END.split(strip_comments(text)) if s.strip()]


def parse(path: Traversable) -> dict[str, str]:
    """The named statements of one file, without comments or the closing semicolon."""
    parts = _NAME.split(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"{path}: query {name!r} is defined twice")
        found[name] = strip_comments(body).strip().rstrip(";")
    return found


def with_shared(path: Traversable) -> dict[str, str]:
    """A dialect's queries: its own file's and the shared ones."""
    own, shared = parse(path), parse(SHARED_FILE)
    both = sorted(own.keys() & shared.keys())
    if both:
        raise ValueError(f"{path}: {both} are defined in {SHARED_FILE} too")
    return shared | own


def numbered(directory: Traversable) -> list[tuple[int, str, str]]:
    """(version, file name, text) of every numbered migration of a folder, in order."""
    names = sorted(entry.name for entry in directory.iterdir() if _MIGRATION.match(entry.name))
    found = [
        (int(name[:4]), name, directory.joinpath(name).read_text(encoding="utf-8"))
        for name in names
    ]
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"{directory}: two migrations share a number: {versions}")
    return found


def load_migrations(directory: Traversable, modes: frozenset[Mode]) -> list[Migration]:
    """Every numbered migration of a folder, in order, with the way it declares it runs
    (projections/migration_plan.py): a file that declares none, or one of a mode not in
    `modes`, is refused here, before anything runs."""
    found = []
    for version, name, text in numbered(directory):
        mode, reason = declaration(name, text, modes)
        found.append(Migration(version, name, mode, reason, text, tuple(split_statements(text))))
    return found
