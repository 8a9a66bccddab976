"""How each migration runs, as its file declares it, and what a run would do
(docs/decisions/0024-online-migrations.md).

Every numbered migration opens with one line saying whether it may run while servers
serve the schema:

    -- pinledger: online               brief locks only (new tables, metadata changes)
    -- pinledger: concurrently         Postgres: outside a transaction, statement by
                                       statement (CREATE INDEX CONCURRENTLY)
    -- pinledger: pause "why"          blocks the servers' writes: stop them first

A file without the line, or with another word, is refused when the migrations are
loaded, so no migration's effect on a serving database is left to be guessed. Pure: the
stores read the files and run them (projections/pg/connection.py,
projections/mysql/connection.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from pinledger.projections.store import StoreError

DECISION = "docs/decisions/0024-online-migrations.md"


class Mode(enum.Enum):
    ONLINE = "online"
    CONCURRENTLY = "concurrently"
    PAUSE = "pause"


# The whole first line: the mode, and for a pause its reason in double quotes.
_DECLARATION = re.compile(r'^-- pinledger: (?P<mode>[a-z]+)(?: "(?P<reason>[^"]+)")?\s*$')
_SPELLINGS = '`-- pinledger: online`, `-- pinledger: concurrently` or `-- pinledger: pause "why"`'


class MigrationFileError(ValueError):
    """A migration file that does not say how it runs, or says it wrongly."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    mode: Mode
    # Why a pause is needed (None unless mode is PAUSE).
    reason: str | None
    # The file's text, run as one transaction unless the mode is CONCURRENTLY.
    text: str
    # Its statements, comments out, each run on its own (CONCURRENTLY on Postgres; every
    # migration on MariaDB, whose DDL commits implicitly).
    statements: tuple[str, ...]

    def how(self) -> str:
        """How it runs, as `migrate --check` and the refusal of a pause say it."""
        if self.mode is Mode.PAUSE:
            return f"needs a pause: {self.reason}"
        if self.mode is Mode.CONCURRENTLY:
            return "concurrently (outside a transaction; writes go on)"
        return "online (brief locks only)"


def declaration(name: str, text: str, modes: frozenset[Mode]) -> tuple[Mode, str | None]:
    """The mode a migration file declares on its first line, and a pause's reason."""
    first = text.split("\n", 1)[0]
    found = _DECLARATION.match(first)
    if found is None:
        raise MigrationFileError(
            f"migration {name}: its first line must say how it runs, one of {_SPELLINGS} "
            f"({DECISION}); it is {first!r}"
        )
    try:
        mode = Mode(found["mode"])
    except ValueError:
        raise MigrationFileError(
            f"migration {name}: unknown way to run {found['mode']!r}; write one of {_SPELLINGS}"
        ) from None
    if mode not in modes:
        allowed = ", ".join(sorted(m.value for m in modes))
        raise MigrationFileError(
            f"migration {name}: {mode.value!r} is not a way this database runs migrations "
            f"(it knows {allowed}; {DECISION})"
        )
    reason = found["reason"]
    if (mode is Mode.PAUSE) != (reason is not None):
        raise MigrationFileError(
            f"migration {name}: a pause, and only a pause, gives its reason in double "
            f'quotes: `-- pinledger: pause "why"`; the line is {first!r}'
        )
    return mode, reason


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run would do: the pending migrations in order, and whether the schema is
    new (no migration applied yet: nothing can be serving it, its tables are empty,
    so a pause costs nothing and every migration runs without one)."""

    schema: str
    pending: tuple[Migration, ...]
    new_schema: bool

    def needs_pause(self) -> tuple[Migration, ...]:
        """The pending migrations that would block the servers' writes."""
        if self.new_schema:
            return ()
        return tuple(m for m in self.pending if m.mode is Mode.PAUSE)


def plan(
    schema: str, migrations: list[Migration], applied: set[int], upto: int | None = None
) -> Plan:
    pending = tuple(
        m for m in migrations if m.version not in applied and (upto is None or m.version <= upto)
    )
    return Plan(schema, pending, new_schema=not applied)


# Told of each migration applied, with how long it took (seconds): `pinledger migrate`
# prints a line for each.
Progress = Callable[[Migration, float], None]


class PauseNeededError(StoreError):
    """A migration that blocks writes was reached without leave to pause; the migrations
    before it were applied."""

    def __init__(self, schema: str, migration: Migration) -> None:
        self.migration = migration
        super().__init__(
            f"migration {migration.name} {migration.how()}; it was not run (schema "
            f"{schema}). Stop every server of this schema, then run "
            f"`pinledger migrate --allow-pause`, then start them again"
        )
