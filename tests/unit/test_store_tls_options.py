"""TLS to the stores, without a server: the MySQL DSN's TLS options
(projections/mysql/tls.py) and what a refused connection says on each store
(projections/pg/refusals.py, projections/mysql/refusals.py): the database, the reason,
the setting to check, on one line, and never the DSN's password."""

from __future__ import annotations

import re
import ssl

import psycopg
import pymysql
import pytest
from psycopg_pool import PoolTimeout

from pinledger.projections.dsn import redacted
from pinledger.projections.mysql.connection import connect_args
from pinledger.projections.mysql.connection import store_error as my_store_error
from pinledger.projections.mysql.tls import MyTls, driver_args, parse_tls
from pinledger.projections.pg.connection import store_error as pg_store_error
from pinledger.projections.pg.refusals import refusal as pg_refusal
from pinledger.projections.store import StoreError, StoreRefusedError, StoreUnavailableError


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", MyTls()),
        ("ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem", MyTls("VERIFY_IDENTITY", "/ca.pem")),
        ("ssl-mode=verify_ca&ssl-ca=/ca.pem", MyTls("VERIFY_CA", "/ca.pem")),
        ("ssl_mode=REQUIRED", MyTls("REQUIRED")),
        ("ssl-mode=DISABLED", MyTls("DISABLED")),
        ("ssl-mode=PREFERRED", MyTls("PREFERRED")),
        # A CA or a client certificate without a mode: the name is checked too.
        ("ssl-ca=/ca.pem", MyTls("VERIFY_IDENTITY", "/ca.pem")),
        ("ssl-cert=/c.pem&ssl-key=/c.key", MyTls("VERIFY_IDENTITY", "", "/c.pem", "/c.key")),
        ("ssl-ca=%2Fa%20dir%2Fca.pem", MyTls("VERIFY_IDENTITY", "/a dir/ca.pem")),
    ],
)
def test_the_dsn_query_string_gives_the_tls_options(query: str, expected: MyTls) -> None:
    assert parse_tls(query) == expected


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("sslmode=verify-full", "unknown option 'sslmode': it takes ssl-mode, ssl-ca"),
        ("ssl-mode=VERIFY_FULL", "ssl-mode=VERIFY_FULL: expected one of DISABLED"),
        ("ssl-mode=REQUIRED&ssl_mode=DISABLED", "ssl-mode is given twice"),
        ("ssl-ca=", "ssl-ca is empty"),
        ("ssl-cert=/c.pem", "ssl-cert and ssl-key go together"),
        ("ssl-mode=DISABLED&ssl-ca=/ca.pem", "certificates need ssl-mode=VERIFY_IDENTITY"),
    ],
)
def test_a_wrong_option_is_refused_by_name(query: str, said: str) -> None:
    with pytest.raises(StoreError, match="the MySQL DSN's query string") as refused:
        parse_tls(query)
    assert said in str(refused.value)


def test_each_mode_becomes_the_drivers_arguments() -> None:
    assert driver_args(MyTls()) == {} and driver_args(MyTls("PREFERRED")) == {}
    assert driver_args(MyTls("DISABLED")) == {"ssl_disabled": True}
    required = driver_args(MyTls("REQUIRED"))["ssl"]
    assert required.verify_mode == ssl.CERT_NONE and not required.check_hostname
    verify_ca = driver_args(MyTls("VERIFY_CA"))["ssl"]
    assert verify_ca.verify_mode == ssl.CERT_REQUIRED and not verify_ca.check_hostname
    identity = driver_args(MyTls("VERIFY_IDENTITY"))["ssl"]
    assert identity.verify_mode == ssl.CERT_REQUIRED and identity.check_hostname


def test_a_file_that_cannot_be_used_is_named() -> None:
    with pytest.raises(
        StoreError, match=re.escape("ssl-ca=/no/such/ca.pem: cannot use it as a CA file")
    ):
        driver_args(MyTls("VERIFY_IDENTITY", "/no/such/ca.pem"))
    with pytest.raises(
        StoreError, match=re.escape("ssl-cert=/no/c.pem, ssl-key=/no/c.key: cannot load")
    ):
        driver_args(MyTls("VERIFY_CA", "", "/no/c.pem", "/no/c.key"))


def test_connect_args_carry_the_tls_options_and_errors_never_the_password() -> None:
    args = connect_args("mysql://pin:s3cret@db:3306/ledger?ssl-mode=VERIFY_IDENTITY")
    assert isinstance(args["ssl"], ssl.SSLContext) and args["password"] == "s3cret"
    assert "ssl" not in connect_args("mysql://pin:s3cret@db:3306/ledger")
    with pytest.raises(StoreError) as refused:
        connect_args("mysq://pin:s3cret@db:3306/ledger")
    assert "s3cret" not in str(refused.value) and "pin:***@db:3306" in str(refused.value)
    assert redacted("mysql://pin:p%40ss@db/x?ssl-mode=REQUIRED") == (
        "mysql://pin:***@db/x?ssl-mode=REQUIRED"
    )
    assert redacted("mysql://db/x") == "mysql://db/x"


LIBPQ = 'connection failed: connection to server at "127.0.0.1", port 54339 failed: '


@pytest.mark.parametrize(
    ("libpq", "reason", "setting"),
    [
        (
            'FATAL:  password authentication failed for user "pinledger"',
            "the password was refused",
            "PINLEDGER_STORE_DSN",
        ),
        (
            'FATAL:  pg_hba.conf rejects connection for host "127.0.0.1", user "pinledger", '
            'database "pinledger", no encryption',
            "takes TLS connections only and this one did not use TLS",
            "sslmode=verify-full",
        ),
        (
            "SSL error: certificate verify failed",
            "does not trust the server's certificate",
            "sslrootcert",
        ),
        (
            'server certificate for "db.example" does not match host name "127.0.0.1"',
            "does not name the host",
            "verify-full",
        ),
        (
            'root certificate file "/root/.postgresql/root.crt" does not exist\nEither provide '
            "the file, use the system's trusted roots with sslrootcert=system, or change sslmode",
            "needs the CA that signed",
            "sslrootcert",
        ),
        ("server does not support SSL, but SSL was required", "does not offer TLS", "sslmode"),
    ],
)
def test_a_postgres_refusal_says_why_on_one_line(libpq: str, reason: str, setting: str) -> None:
    said = pg_refusal(LIBPQ + libpq)
    assert said is not None and said.startswith("Postgres refused the connection: ")
    assert reason in said and setting in said and "\n" not in said


def test_postgres_down_is_unreachable_not_refused() -> None:
    down = (
        LIBPQ
        + "Connection refused\n\tIs the server running on that host and accepting TCP/IP "
        + "connections?"
    )
    assert pg_refusal(down) is None
    error = pg_store_error(psycopg.OperationalError(down), "reading", "s")
    assert type(error) is StoreUnavailableError and "make stack-up" in str(error)
    assert "\n" not in str(error)


def test_a_pool_timeout_says_why_the_pools_connections_were_refused() -> None:
    refused = psycopg.OperationalError(LIBPQ + "SSL error: certificate verify failed")
    error = pg_store_error(PoolTimeout("couldn't get a connection"), "reading", "s", refused)
    assert isinstance(error, StoreRefusedError)
    assert "does not trust the server's certificate" in str(error)
    assert "(reading, schema s)" in str(error)
    plain = pg_store_error(PoolTimeout("couldn't get a connection"), "reading", "s")
    assert type(plain) is StoreUnavailableError


def _mysql(code: int, message: str) -> pymysql.err.OperationalError:
    return pymysql.err.OperationalError(code, message)


def test_a_mysql_refusal_says_why_on_one_line() -> None:
    verified = MyTls("VERIFY_IDENTITY", "/ca.pem")
    denied = _mysql(1045, "Access denied for user 'pin'@'127.0.0.1' (using password: YES)")
    wrong = my_store_error(denied, "connecting", "db", verified)
    assert isinstance(wrong, StoreRefusedError)
    assert str(wrong).startswith("MariaDB/MySQL refused the connection: the login was refused")
    # Without TLS, MariaDB's "Access denied" may mean the server wants TLS.
    plain = str(my_store_error(denied, "connecting", "db", MyTls("DISABLED")))
    assert "without TLS" in plain and "ssl-mode=VERIFY_IDENTITY" in plain
    untrusted = _mysql(
        2003,
        "Can't connect to MySQL server on '127.0.0.1' ([SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed: self-signed certificate in certificate chain (_ssl.c:1006))",
    )
    said = str(my_store_error(untrusted, "connecting", "db", verified))
    assert "does not trust the server's certificate" in said and "ssl-ca" in said
    mismatch = _mysql(
        2003,
        "Can't connect ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP "
        "address mismatch, certificate is not valid for '10.0.0.1'. (_ssl.c:1006))",
    )
    assert "does not name the host" in str(my_store_error(mismatch, "connecting", "db", verified))
    no_tls = _mysql(2026, "SSL is required but the server doesn't support it")
    assert "does not offer TLS" in str(my_store_error(no_tls, "connecting", "db", verified))
    mysql8 = _mysql(3159, "Connections using insecure transport are prohibited")
    assert "takes TLS connections only" in str(my_store_error(mysql8, "connecting", "db"))


def test_mysql_down_is_unreachable_not_refused() -> None:
    down = my_store_error(
        _mysql(2003, "Can't connect to MySQL server on '127.0.0.1' ([Errno 111])"), "reading", "db"
    )
    assert type(down) is StoreUnavailableError and "make stack-up" in str(down)
