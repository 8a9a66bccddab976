"""The MySQL/MariaDB store: the SQL store (projections/sql/) over the MariaDB dialect
(dialect.py), the only code that runs the MySQL store's SQL (all of it from
queries.sql) through PyMySQL. Dialect differences: docs/decisions/0016-mysql-store.md.
"""

from __future__ import annotations

from pinledger.projections.mysql.connection import check_schema_name
from pinledger.projections.mysql.dialect import MyDialect
from pinledger.projections.sql.store import SqlStore

__all__ = ["Store", "check_schema_name"]


class Store(SqlStore):
    """A projection in one MariaDB/MySQL database (created when missing, not migrated)."""

    dialect: MyDialect

    def __init__(self, dsn: str, schema: str = "pinledger", max_size: int = 8) -> None:
        super().__init__(MyDialect(dsn, schema, max_size))
