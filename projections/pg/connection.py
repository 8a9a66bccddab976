"""The Postgres connection of a store: its schema, its pool, its migrations, and the one
place driver errors are turned into StoreError.

A store works in one schema (`search_path`), so the live projection, a replay's scratch
schema and each test's own schema are the same code on different names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from pinledger.projections.migration_plan import (
    Migration,
    Mode,
    PauseNeededError,
    Plan,
    Progress,
    plan,
)
from pinledger.projections.pg.refusals import one_line, refusal
from pinledger.projections.pg.sql import composed, index_built, migrations, query
from pinledger.projections.sql.names import check_schema_name
from pinledger.projections.store import (
    InvalidRegexError,
    StoreError,
    StoreRefusedError,
    StoreUnavailableError,
)

_START_IT = "Start it with `make stack-up`, or point PINLEDGER_PG_DSN at your server."

# While Postgres is down: a call waits this long for a connection, then fails saying
# Postgres is unreachable; a connect that gets no answer (a host gone) gives up after
# CONNECT_TIMEOUT_S.
POOL_WAIT_S = 5.0
CONNECT_TIMEOUT_S = 5
MIGRATION_LOCK_POLL_S = 0.2
# psycopg_pool retries a failed connect with a doubling delay until this much time has
# passed: left at its default (5 min), the delay had grown to 8-16 s by the end of a
# 20 s outage, and the pool went on failing that long after Postgres was back. Past
# it the pool gives up, and the next call that needs a connection starts a new
# attempt at once, so a short give-up bounds the delay instead.
RECONNECT_GIVE_UP_S = 4.0
# A server frozen (SIGSTOP, a stuck VM) in the middle of a transaction keeps its row
# locks while its connection stays open: the new owner of its partitions would wait on
# them until it resumed. Postgres ends a session left idle inside a transaction this
# long, releasing them; none of ours waits on anything between its statements.
IDLE_IN_TRANSACTION_TIMEOUT_MS = 5000

log = logging.getLogger(__name__)

# SQLSTATE class 54, "program limit exceeded": an index row or a jsonb value too large,
# too many parameters. psycopg makes it an OperationalError, but the same statement fails
# again the same way: a refusal (a plain StoreError), not an unreachable Postgres, so a
# record holding such a value pauses its partition alone (decision 0032).
_LIMIT_EXCEEDED = "54"
# idle_in_transaction_session_timeout ended the session (IDLE_IN_TRANSACTION_TIMEOUT_MS).
_IDLE_IN_TRANSACTION_ENDED = "25P03"


def store_error(
    exc: psycopg.Error, what: str, schema: str, connect_failure: psycopg.Error | None = None
) -> StoreError:
    """The StoreError a driver error becomes; the driver's type never leaves the adapter.
    `connect_failure`: the pool's last failed connection attempt, which says why a pool
    timeout happened when Postgres refused the pool's connections."""
    if isinstance(exc, psycopg.errors.InvalidRegularExpression):
        return InvalidRegexError(
            f"invalid body regex (Postgres regular expression syntax) while {what}: "
            f"{exc.diag.message_primary or exc}"
        )
    if exc.sqlstate == _IDLE_IN_TRANSACTION_ENDED:
        # This server stalled inside a transaction (frozen, starved) past the timeout
        # it set itself, and Postgres ended its session: not a refusal of what it
        # wrote (that would pause the partition as if its record were bad), a
        # connection to open again.
        return StoreUnavailableError(
            f"Postgres ended a session idle in a transaction for over "
            f"{IDLE_IN_TRANSACTION_TIMEOUT_MS} ms ({what}, schema {schema}): this server "
            "stalled; going on with a new connection"
        )
    limit = (exc.sqlstate or "").startswith(_LIMIT_EXCEEDED)
    if isinstance(exc, psycopg.OperationalError) and not limit:  # PoolTimeout, PoolClosed
        pool_failed = isinstance(exc, PoolTimeout) and connect_failure is not None
        refused = refusal(str(connect_failure if pool_failed else exc))
        if refused is not None:
            return StoreRefusedError(f"{refused} ({what}, schema {schema})")
        return StoreUnavailableError(
            f"Postgres is unreachable ({what}, schema {schema}): {one_line(str(exc))}. {_START_IT}"
        )
    return StoreError(f"Postgres refused {what} (schema {schema}): {type(exc).__name__}: {exc}")


class ConnectFailures:
    """The last connection attempt of a pool, when it failed (None once one works)."""

    def __init__(self) -> None:
        self.last: psycopg.Error | None = None

    def connection_class(self) -> type[psycopg.Connection[TupleRow]]:
        """A connection class for the pool whose connect() records here how it ended
        (the pool itself only logs why it could not connect)."""
        failures = self

        class Recorded(psycopg.Connection[TupleRow]):
            @classmethod
            def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
                try:
                    conn = super().connect(conninfo, **kwargs)
                except psycopg.OperationalError as exc:
                    failures.last = exc
                    raise
                failures.last = None
                return conn

        return Recorded


def check_server(dsn: str) -> None:
    """Connect once, as a store would, and leave: StoreRefusedError saying why when
    Postgres refuses this client, StoreUnavailableError when it cannot be reached
    (`pinledger doctor`'s check; it touches no schema)."""
    try:
        psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.OperationalError as exc:
        raise _unconnected(exc) from exc
    except psycopg.Error as exc:
        raise store_error(exc, "connecting", "-") from exc


def _unconnected(exc: psycopg.OperationalError) -> StoreUnavailableError:
    """A first connection's failure: refused (why), or unreachable."""
    refused = refusal(str(exc))
    if refused is not None:
        return StoreRefusedError(refused)
    return StoreUnavailableError(f"cannot connect to Postgres ({one_line(str(exc))}). {_START_IT}")


class PgConnection:
    """A pool of connections to one schema (created when missing)."""

    def __init__(self, dsn: str, schema: str = "public", max_size: int = 8) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(composed("create_schema", schema=self.schema))
        except psycopg.OperationalError as exc:
            raise _unconnected(exc) from exc
        except psycopg.Error as exc:
            raise store_error(exc, "creating the schema", self.schema) from exc
        self._options = (
            f"-c search_path={self.schema} "
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}"
        )
        self._connect_failures = ConnectFailures()
        self.pool = ConnectionPool(
            dsn,
            connection_class=self._connect_failures.connection_class(),
            min_size=1,
            max_size=max_size,
            kwargs={"options": self._options, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=POOL_WAIT_S,
            reconnect_timeout=RECONNECT_GIVE_UP_S,
            open=True,
            name=f"pinledger-{self.schema}",
        )

    @contextmanager
    def connection(self, what: str, transaction: bool = False) -> Iterator[psycopg.Connection]:
        """A pooled connection (in one transaction when asked); a driver error inside
        becomes StoreError saying `what` was being done."""
        try:
            with self.pool.connection() as conn:
                if transaction:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
        except psycopg.Error as exc:
            raise store_error(exc, what, self.schema, self._connect_failures.last) from exc
        except UnicodeEncodeError as exc:
            # Text that is not UTF-8 (an unpaired surrogate): refused before it is sent,
            # and again every time.
            raise StoreError(
                f"Postgres refused {what} (schema {self.schema}): text that is not UTF-8: {exc}"
            ) from exc

    def close(self) -> None:
        self.pool.close()

    def drop(self) -> None:
        """Drop this store's schema with everything in it (scratch and test schemas)."""
        self.pool.close()
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(composed("drop_schema", schema=self.schema))
        except psycopg.Error as exc:
            raise store_error(exc, "dropping the schema", self.schema) from exc

    @contextmanager
    def _migrating(self, what: str, lock: bool = True) -> Iterator[psycopg.Connection]:
        """A connection of its own in autocommit (a concurrent migration runs outside any
        transaction; a pooled one would carry autocommit back to the pool), holding
        the schema's migration lock until it closes when `lock`."""
        try:
            with psycopg.connect(
                self.dsn,
                autocommit=True,
                options=self._options,
                connect_timeout=CONNECT_TIMEOUT_S,
            ) as conn:
                if lock:
                    self._lock_migrations(conn)
                yield conn
        except psycopg.Error as exc:
            raise store_error(exc, what, self.schema) from exc

    def _lock_migrations(self, conn: psycopg.Connection) -> None:
        """Take the schema's migration lock, polling between tries outside any
        transaction: a session blocked on the lock would hold a snapshot that the
        holder's CREATE INDEX CONCURRENTLY waits for, and Postgres would break the
        deadlock by failing one of them (two servers starting on a new schema did)."""
        waiting = False
        while not (conn.execute(query("try_lock_migrations")).fetchone() or (False,))[0]:
            if not waiting:
                log.info("schema %s: another process is migrating it; waiting", self.schema)
                waiting = True
            time.sleep(MIGRATION_LOCK_POLL_S)

    def _plan(self, conn: psycopg.Connection, upto: int | None) -> Plan:
        applied: set[int] = set()
        exists = conn.execute(query("migrations_table_exists")).fetchone()
        if exists and exists[0]:
            applied = {row[0] for row in conn.execute(query("applied_migrations"))}
        return plan(self.schema, migrations(), applied, upto)

    def migration_plan(self, upto: int | None = None) -> Plan:
        """What `migrate` would do now; changes nothing. Takes no lock: `--check` answers
        at once while another process runs a long concurrent build."""
        with self._migrating("reading the migrations applied", lock=False) as conn:
            return self._plan(conn, upto)

    def migrate(
        self,
        upto: int | None = None,
        *,
        allow_pause: bool = False,
        progress: Progress | None = None,
    ) -> list[str]:
        """Apply the migrations this schema lacks (those numbered up to `upto`, when
        given: tests of a migration's data conversion); returns the names applied.

        Each migration is recorded as it completes: an online or pause one in the
        transaction of its statements, a concurrent one after its last statement. One
        that needs a pause raises PauseNeededError unless `allow_pause` (or the schema
        is new), the ones before it applied."""
        applied_now = []
        with self._migrating("migrating") as conn:
            conn.execute(query("create_migrations_table"))
            pending = self._plan(conn, upto)
            for migration in pending.pending:
                if migration in pending.needs_pause() and not allow_pause:
                    raise PauseNeededError(self.schema, migration)
                started = time.monotonic()
                if migration.mode is Mode.CONCURRENTLY:
                    self._run_concurrently(conn, migration)
                    conn.execute(query("record_migration"), _record(migration))
                else:
                    with conn.transaction():
                        conn.execute(migration.text.encode("utf-8"))
                        conn.execute(query("record_migration"), _record(migration))
                applied_now.append(migration.name)
                if progress is not None:
                    progress(migration, time.monotonic() - started)
        return applied_now

    def _run_concurrently(self, conn: psycopg.Connection, migration: Migration) -> None:
        """Each statement in its own implicit transaction (CREATE INDEX CONCURRENTLY
        refuses to run in a block). An index an interrupted run left INVALID is dropped
        first: IF NOT EXISTS would keep it, and no query would ever use it."""
        for statement in migration.statements:
            index = index_built(statement)
            if index is not None:
                invalid = conn.execute(query("index_is_invalid"), {"name": index}).fetchone()
                if invalid and invalid[0]:
                    log.warning(
                        "migration %s: index %s was left invalid by an interrupted build; "
                        "dropping it to build it again",
                        migration.name,
                        index,
                    )
                    conn.execute(composed("drop_index_concurrently", index=index))
            conn.execute(statement.encode("utf-8"))


def _record(migration: Migration) -> dict[str, object]:
    return {"version": migration.version, "name": migration.name}
