"""The one place a store is chosen: by its DSN's scheme, `mysql://` for the MySQL/MariaDB
adapter (projections/mysql), anything else for Postgres (projections/pg: a
`postgresql://` URL or a libpq key=value string). Every place that builds a Store
(the server, the command line, the tests) goes through `open_store`; `check_store`
asks the server named whether it takes this client."""

from __future__ import annotations

from pinledger.projections.dsn import is_mysql
from pinledger.projections.store import LedgerStore


def open_store(dsn: str, schema: str, max_size: int = 8) -> LedgerStore:
    """A store on `schema` (a Postgres schema, or a MariaDB database) of the server
    `dsn` names, created when missing (not migrated)."""
    # Imported on use: a deployment on one database needs only that driver loaded.
    if is_mysql(dsn):
        from pinledger.projections.mysql.store import Store as MyStore  # noqa: PLC0415

        return MyStore(dsn, schema, max_size=max_size)
    from pinledger.projections.pg.store import Store as PgStore  # noqa: PLC0415

    return PgStore(dsn, schema, max_size=max_size)


def check_store(dsn: str) -> None:
    """Whether the database server `dsn` names takes this client: a StoreError saying
    why not (StoreRefusedError: a certificate not trusted, TLS required, a password
    refused; StoreUnavailableError: not reached). Opens no schema and changes nothing."""
    if is_mysql(dsn):
        from pinledger.projections.mysql.connection import check_server as check_mysql  # noqa: PLC0415

        check_mysql(dsn)
        return
    from pinledger.projections.pg.connection import check_server as check_pg  # noqa: PLC0415

    check_pg(dsn)
