"""The one place a store is chosen: by its DSN's scheme, `mysql://` for the MySQL/MariaDB
adapter (projections/mysql), anything else for Postgres (projections/pg: a
`postgresql://` URL or a libpq key=value string). Every place that builds a Store
(the server, the command line, the tests) goes through `open_store`."""

from __future__ import annotations

from pinledger.projections.store import LedgerStore

MYSQL_SCHEME = "mysql://"


def is_mysql(dsn: str) -> bool:
    return dsn.startswith(MYSQL_SCHEME)


def open_store(dsn: str, schema: str, max_size: int = 8) -> LedgerStore:
    """A store on `schema` (a Postgres schema, or a MariaDB database) of the server
    `dsn` names, created when missing (not migrated)."""
    # Imported on use: a deployment on one database needs only that driver loaded.
    if is_mysql(dsn):
        from pinledger.projections.mysql.store import Store as MyStore  # noqa: PLC0415

        return MyStore(dsn, schema, max_size=max_size)
    from pinledger.projections.pg.store import Store as PgStore  # noqa: PLC0415

    return PgStore(dsn, schema, max_size=max_size)
