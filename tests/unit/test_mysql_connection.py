"""The MySQL store's DSN parsing and its one translation of driver errors
(projections/mysql/connection.py): no PyMySQL exception leaves the adapter."""

from __future__ import annotations

import pymysql
import pytest

from pinledger.projections.mysql.connection import check_schema_name, connect_args, store_error
from pinledger.projections.store import InvalidRegexError, StoreError, StoreUnavailableError


def test_a_mysql_dsn_becomes_connect_arguments() -> None:
    assert connect_args("mysql://pin:p%40ss@db.example:3307/ledger") == {
        "host": "db.example",
        "port": 3307,
        "user": "pin",
        "password": "p@ss",
        "database": "ledger",
    }
    assert connect_args("mysql://pin:x@db/")["port"] == 3306
    with pytest.raises(StoreError, match="not a MySQL DSN"):
        connect_args("postgresql://pin:x@db/ledger")


def test_driver_errors_become_store_errors_by_kind() -> None:
    regex = store_error(pymysql.err.OperationalError(1139, "Regex error 'x'"), "counting", "s")
    assert isinstance(regex, InvalidRegexError) and "PCRE2" in str(regex)
    gone = store_error(pymysql.err.OperationalError(2003, "Can't connect"), "reading", "s")
    assert isinstance(gone, StoreUnavailableError) and "make stack-up" in str(gone)
    refused = store_error(pymysql.err.IntegrityError(1062, "Duplicate entry"), "writing", "s")
    assert type(refused) is StoreError and "Duplicate entry" in str(refused)


def test_database_names_are_checked() -> None:
    assert check_schema_name("pinledger_2") == "pinledger_2"
    for bad in ("Upper", "1st", "with-dash", "x" * 64, "a`b"):
        with pytest.raises(StoreError, match="database name"):
            check_schema_name(bad)
