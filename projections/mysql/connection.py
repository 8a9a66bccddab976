"""The MariaDB/MySQL connection of a store: its database, its pool, its migrations, and
the one place driver errors are turned into StoreError.

A store works in one database (a store's "schema" is a MariaDB database), so the live
projection, a replay's scratch database and each test's own database are the same code
on different names. The driver is PyMySQL (pure Python; chosen by measurement,
docs/decisions/0016-mysql-store.md); it has no pool, so this module keeps one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, TypeAlias
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.cursors

from pinledger.projections.dsn import redacted
from pinledger.projections.migration_plan import PauseNeededError, Plan, Progress, plan
from pinledger.projections.mysql.refusals import refusal
from pinledger.projections.mysql.sql import migrations, query
from pinledger.projections.mysql.tls import MyTls, driver_args, parse_tls
from pinledger.projections.sql import names
from pinledger.projections.store import (
    InvalidRegexError,
    StoreError,
    StoreRefusedError,
    StoreUnavailableError,
)

_START_IT = "Start it with `make stack-up`, or point PINLEDGER_STORE_DSN at your server."

# While MariaDB is down: a call waits this long for a pooled connection, a connect this
# long for an answer.
POOL_WAIT_S = 5.0
CONNECT_TIMEOUT_S = 5

# Driver error codes meaning "the server is not there (now)": client-side connection
# errors (CR_*) and the server going away or refusing connections.
_UNREACHABLE = {1040, 1053, 1927, 2002, 2003, 2005, 2006, 2013, 2055}
# Driver error codes meaning "not now": a lock wait timed out, a deadlock victim. The same
# call may work later (Postgres's are operational errors too), so they are no refusal,
# which would pause the partition being committed (decision 0032).
_NOT_NOW = {1205, 1213}
ER_REGEXP_ERROR = 1139
ER_NO_PARTITION_FOR_GIVEN_VALUE = 1526

# The stubs' generic alias: a string, since the runtime class is not subscriptable.
Connection: TypeAlias = "pymysql.connections.Connection[pymysql.cursors.Cursor]"


class _PoolUnavailableError(Exception):
    """No pooled connection could be had (closed, or all busy past POOL_WAIT_S)."""


def check_schema_name(schema: str) -> str:
    """A store's "schema" is a MariaDB database: the same names, said so."""
    return names.check_schema_name(schema, "database")


def connect_args(dsn: str) -> dict[str, Any]:
    """PyMySQL's keyword arguments from mysql://user:password@host:port/database, with
    the TLS options of its query string (tls.py: ?ssl-mode=VERIFY_IDENTITY&ssl-ca=...)."""
    url = urlsplit(dsn)
    if url.scheme != "mysql" or not url.hostname:
        raise StoreError(
            f"not a MySQL DSN (mysql://user:password@host:port/database): {redacted(dsn)!r}"
        )
    return {
        "host": url.hostname,
        "port": url.port or 3306,
        "user": unquote(url.username or ""),
        "password": unquote(url.password or ""),
        "database": url.path.lstrip("/") or None,
    } | driver_args(tls_of(dsn))


def tls_of(dsn: str) -> MyTls:
    """The DSN's TLS options (tls.py)."""
    return parse_tls(urlsplit(dsn).query)


def error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _said(exc: BaseException) -> str:
    """The driver's message, without its code."""
    return str(exc.args[1] if len(exc.args) > 1 else exc)


def store_error(exc: Exception, what: str, schema: str, tls: MyTls | None = None) -> StoreError:
    """The StoreError a driver error becomes; the driver's type never leaves the adapter.
    `tls`: the connection's TLS options, which say what a refused login means."""
    code = error_code(exc)
    refused = refusal(code, _said(exc), tls or MyTls())
    if refused is not None:
        return StoreRefusedError(f"{refused} ({what}, database {schema})")
    if code == ER_REGEXP_ERROR:
        return InvalidRegexError(
            f"invalid body regex (MariaDB regular expression syntax, PCRE2) while {what}: "
            f"{exc.args[1] if len(exc.args) > 1 else exc}"
        )
    if isinstance(exc, _PoolUnavailableError) or code in _UNREACHABLE:
        return StoreUnavailableError(
            f"MySQL is unreachable ({what}, database {schema}): {exc}. {_START_IT}"
        )
    if code in _NOT_NOW:
        return StoreUnavailableError(
            f"MySQL could not finish {what} now (database {schema}): {exc}; it is tried again"
        )
    return StoreError(f"MySQL refused {what} (database {schema}): {type(exc).__name__}: {exc}")


def check_server(dsn: str) -> None:
    """Connect once, as a store would, and leave: StoreRefusedError saying why when the
    server refuses this client, StoreUnavailableError when it cannot be reached
    (`pinledger doctor`'s check; it touches no database)."""
    args = connect_args(dsn) | {"database": None, "connect_timeout": CONNECT_TIMEOUT_S}
    tls = tls_of(dsn)
    try:
        pymysql.connect(**args).close()
    except pymysql.Error as exc:
        refused = refusal(error_code(exc), _said(exc), tls)
        if refused is not None:
            raise StoreRefusedError(refused) from exc
        raise store_error(exc, "connecting", urlsplit(dsn).path.lstrip("/"), tls) from exc


class _Pool:
    """At most `max_size` connections, idle ones reused; a connection that saw an error
    is closed rather than reused (it may be broken or mid-transaction)."""

    def __init__(self, args: Mapping[str, Any], max_size: int) -> None:
        self._args = dict(args)
        self._slots = threading.BoundedSemaphore(max_size)
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self.closed = False

    def _connect(self) -> Connection:
        conn = pymysql.connect(**self._args)
        with conn.cursor() as cur:
            cur.execute(query("session_settings"))
        return conn

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        if self.closed:
            raise _PoolUnavailableError("the store is closed")
        if not self._slots.acquire(timeout=POOL_WAIT_S):
            raise _PoolUnavailableError(f"no free connection within {POOL_WAIT_S} s")
        conn: Connection | None = None
        healthy = False
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._connect()
            yield conn
            healthy = True
        finally:
            if conn is not None:
                if healthy and not self.closed:
                    with self._lock:
                        self._idle.append(conn)
                else:
                    _close_quietly(conn)
            self._slots.release()

    def close(self) -> None:
        self.closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            _close_quietly(conn)


def _close_quietly(conn: Connection) -> None:
    with suppress(pymysql.Error):  # already gone: nothing to close
        conn.close()


class MyConnection:
    """A pool of connections to one database (created when missing)."""

    def __init__(self, dsn: str, schema: str = "pinledger", max_size: int = 8) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)
        args = connect_args(dsn) | {
            "autocommit": True,
            "charset": "utf8mb4",
            "connect_timeout": CONNECT_TIMEOUT_S,
        }
        self._server_args = args
        self._tls = tls_of(dsn)
        try:
            with self._server() as cur:
                cur.execute(query("create_schema", schema=self.schema))
        except pymysql.Error as exc:
            raise store_error(exc, "creating the database", self.schema, self._tls) from exc
        self.pool = _Pool(args | {"database": self.schema}, max_size)

    @contextmanager
    def _server(self) -> Iterator[pymysql.cursors.Cursor]:
        """A connection of its own to the DSN's database (creating and dropping ours)."""
        conn = pymysql.connect(**self._server_args)
        try:
            with conn.cursor() as cur:
                yield cur
        finally:
            _close_quietly(conn)

    @contextmanager
    def connection(self, what: str, transaction: bool = False) -> Iterator[Connection]:
        """A pooled connection (in one transaction when asked); a driver error inside
        becomes StoreError saying `what` was being done."""
        try:
            with self.pool.connection() as conn:
                if not transaction:
                    yield conn
                    return
                conn.begin()
                try:
                    yield conn
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()
        except (pymysql.Error, _PoolUnavailableError) as exc:
            raise store_error(exc, what, self.schema, self._tls) from exc
        except UnicodeEncodeError as exc:
            # Text that is not UTF-8 (an unpaired surrogate): refused before it is sent,
            # and again every time.
            raise StoreError(
                f"MySQL refused {what} (database {self.schema}): text that is not UTF-8: {exc}"
            ) from exc

    @contextmanager
    def cursor(self, what: str, transaction: bool = False) -> Iterator[pymysql.cursors.Cursor]:
        with self.connection(what, transaction) as conn, conn.cursor() as cur:
            yield cur

    def close(self) -> None:
        self.pool.close()

    def drop(self) -> None:
        """Drop this store's database with everything in it (scratch and test ones)."""
        self.pool.close()
        try:
            with self._server() as cur:
                cur.execute(query("drop_schema", schema=self.schema))
        except pymysql.Error as exc:
            raise store_error(exc, "dropping the database", self.schema, self._tls) from exc

    @contextmanager
    def _migrating(self, what: str) -> Iterator[pymysql.cursors.Cursor]:
        """A cursor holding the database's named migration lock while it is open."""
        with self.cursor(what) as cur:
            cur.execute(query("lock_migrations"))
            taken = cur.fetchone()
            if not taken or taken[0] != 1:
                raise StoreError(
                    f"another process has been migrating database {self.schema} for a "
                    "minute (a server starting, or `pinledger migrate`); run this again "
                    "when it has finished"
                )
            try:
                yield cur
            finally:
                cur.execute(query("unlock_migrations"))

    def _plan(self, cur: pymysql.cursors.Cursor, upto: int | None) -> Plan:
        applied: set[int] = set()
        cur.execute(query("migrations_table_exists"))
        exists = cur.fetchone()
        if exists and exists[0]:
            cur.execute(query("applied_migrations"))
            applied = {row[0] for row in cur.fetchall()}
        return plan(self.schema, migrations(), applied, upto)

    def migration_plan(self, upto: int | None = None) -> Plan:
        """What `migrate` would do now; changes nothing. Takes no lock: `--check` answers
        at once while another process migrates."""
        with self.cursor("reading the migrations applied") as cur:
            return self._plan(cur, upto)

    def migrate(
        self,
        upto: int | None = None,
        *,
        allow_pause: bool = False,
        progress: Progress | None = None,
    ) -> list[str]:
        """Apply the migrations this database lacks (those numbered up to `upto`, when
        given); returns the names applied. MariaDB commits each DDL statement on its
        own, so a migration is recorded once all its statements ran, and its statements
        are written to be run again after an interruption (IF NOT EXISTS; decision
        0024). One that needs a pause raises PauseNeededError unless `allow_pause` (or
        the database is new), the ones before it applied."""
        applied_now = []
        with self._migrating("migrating") as cur:
            cur.execute(query("create_migrations_table"))
            pending = self._plan(cur, upto)
            for migration in pending.pending:
                if migration in pending.needs_pause() and not allow_pause:
                    raise PauseNeededError(self.schema, migration)
                started = time.monotonic()
                for statement in migration.statements:
                    cur.execute(statement)
                cur.execute(
                    query("record_migration"),
                    {"version": migration.version, "name": migration.name},
                )
                applied_now.append(migration.name)
                if progress is not None:
                    progress(migration, time.monotonic() - started)
        return applied_now
