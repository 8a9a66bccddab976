"""The base of the one SQL store: its dialect, the store's lifecycle and the helper every
read uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pinledger.projections.migration_plan import Plan, Progress
from pinledger.projections.sql.dialect import Dialect, Params
from pinledger.projections.store import OneShard


class SqlBase(OneShard):
    """A store over one dialect (projections/sql/dialect.py): one database, so one store
    shard (`OneShard`)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        # Replaced whole by `hide`, read by any thread without a lock.
        self._away: Mapping[str, tuple[int, ...]] = MappingProxyType({})

    def hide(self, away: Mapping[str, Sequence[int]]) -> None:
        """Partitions of each queue whose rows this store may hold but which are placed
        on another shard: queue-wide reads leave them out (decision 0031, moves)."""
        self._away = MappingProxyType(
            {queue: tuple(sorted(set(ps))) for queue, ps in away.items() if ps}
        )

    def _hidden(self, queue: str) -> Any:
        """The `away` parameter of a queue-wide read of `queue`."""
        return self.dialect.partition_set(self._away.get(queue, ()))

    @property
    def kind(self) -> str:
        """ "postgres" or "mysql" (the FakeStore says "postgres": it behaves as one)."""
        return self.dialect.kind

    @property
    def dsn(self) -> str:
        return self.dialect.dsn

    @property
    def schema(self) -> str:
        return self.dialect.schema

    def migrate(
        self,
        upto: int | None = None,
        *,
        allow_pause: bool = False,
        progress: Progress | None = None,
    ) -> list[str]:
        """Apply the migrations the schema lacks (those numbered up to `upto`, when
        given: tests of a migration's data conversion); returns the names applied. One
        that needs a pause raises PauseNeededError unless `allow_pause` (decision 0024)."""
        return self.dialect.migrate(upto, allow_pause=allow_pause, progress=progress)

    def migration_plan(self, upto: int | None = None) -> Plan:
        """What `migrate` would do now (`migrate --check`); changes nothing."""
        return self.dialect.migration_plan(upto)

    def close(self) -> None:
        self.dialect.close()

    def drop(self) -> None:
        """Remove the schema (a MariaDB database) with everything in it."""
        self.dialect.drop()

    def _all(
        self, what: str, name: str, params: Params, **identifiers: str
    ) -> list[tuple[Any, ...]]:
        with self.dialect.session(what) as session:
            return session.fetchall(name, params, **identifiers)

    def _first(self, what: str, name: str, params: Params) -> Any:
        """The first column of the first row (None: no row, or NULL)."""
        found = self._all(what, name, params)
        return found[0][0] if found else None
