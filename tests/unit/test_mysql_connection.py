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


def test_a_value_the_database_refuses_is_a_refusal_and_a_lock_wait_is_not() -> None:
    """A refusal fails again the same way: its record pauses its partition alone; a lock
    wait or a deadlock may work the next time (decision 0032)."""
    for code, said in ((1406, "Data too long"), (1366, "Incorrect string value"), (3140, "JSON")):
        refused = store_error(pymysql.err.DataError(code, said), "committing", "s")
        assert type(refused) is StoreError and said in str(refused)
    for code in (1205, 1213):
        later = store_error(pymysql.err.OperationalError(code, "Deadlock"), "committing", "s")
        assert isinstance(later, StoreUnavailableError) and "tried again" in str(later)


def test_database_names_are_checked() -> None:
    assert check_schema_name("pinledger_2") == "pinledger_2"
    for bad in ("Upper", "1st", "with-dash", "x" * 64, "a`b"):
        with pytest.raises(StoreError, match="database name"):
            check_schema_name(bad)
