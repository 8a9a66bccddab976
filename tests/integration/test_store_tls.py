"""Postgres and MariaDB that take TLS clients only (issue 25, docs/security.md), on the
stack's secure databases (`bash stack/stack.sh secure up`, started here when they are
not running: these tests fail, never skip, when they cannot be): a server serves
PinLater calls over the secure Kafka (SASL_SSL) with its projection on each, its DSN
verifying the server (sslmode=verify-full; ssl-mode=VERIFY_IDENTITY); and each refusal
(an untrusted certificate, a client without TLS, a wrong password) stops `pinledger
serve` at start with one line naming the database, the reason and what to check, with
no password in it; `check_store` (the doctor's check) says the same, and so does
/ready when the password changes under a running server."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from pinledger.idl import pinlater
from pinledger.projections.factory import check_store, open_store
from pinledger.projections.pg.connection import ConnectFailures, store_error
from pinledger.projections.store import StoreRefusedError
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    run_pinledger,
    wait_for,
)
from tests.integration.conftest import server_settings
from tests.integration.secure_stack import STACK_LIMIT_S, secure_up

pytestmark = pytest.mark.integration

STORES = {"postgres": "PINLEDGER_SECURE_PG_DSN", "mariadb": "PINLEDGER_SECURE_MYSQL_DSN"}


@pytest.fixture(scope="module")
def secure() -> dict[str, str]:
    return secure_up()


def _password(dsn: str) -> str:
    return urlsplit(dsn).password or ""


def _changed(dsn: str, password: str | None = None, **query: str) -> str:
    """The DSN with another password, or with these query options instead of its own."""
    url = urlsplit(dsn)
    netloc = url.netloc
    if password is not None:
        netloc = f"{url.username}:{password}@{url.hostname}:{url.port}"
    return urlunsplit(
        url._replace(
            netloc=netloc,
            query="&".join(f"{k}={v}" for k, v in query.items()) if query else url.query,
        )
    )


@pytest.mark.parametrize("store", STORES)
def test_a_server_serves_over_sasl_ssl_kafka_with_its_projection_on_a_tls_only_database(
    secure: dict[str, str], store: str, names: tuple[str, str], tmp_path: Path
) -> None:
    prefix, schema = names
    dsn = secure[STORES[store]]
    server = ServerProcess(
        prefix=prefix, schema=schema, settings=server_settings(**secure, PINLEDGER_STORE_DSN=dsn)
    )
    try:
        server.start(tmp_path)
        client = server.client()
        client.createQueue(context(), "safe")
        request = pinlater.PinLaterEnqueueRequest(
            queueName="safe", jobs=[pinlater.PinLaterJob(body=b"over tls")]
        )
        [descriptor] = client.enqueueJobs(context(), request).jobDescriptors
        assert dequeue_until(client, "safe", 1) == {descriptor: b"over tls"}
        client.ackDequeuedJobs(
            context(),
            pinlater.PinLaterJobAckRequest(
                queueName="safe",
                jobsSucceeded=[pinlater.PinLaterJobAckInfo(jobDescriptor=descriptor)],
            ),
        )
        lookup = pinlater.PinLaterLookupJobRequest(jobDescriptors=[descriptor], includeBody=True)

        def succeeded() -> bool:
            found = client.lookupJobs(context(), lookup)[descriptor]
            return bool(found.jobState == pinlater.PinLaterJobState.SUCCEEDED)

        wait_for(succeeded, timeout=30)
        assert client.lookupJobs(context(), lookup)[descriptor].body == b"over tls"
        client.close()
    finally:
        server.stop()
        open_store(dsn, schema).drop()
    assert _password(dsn) not in server.log()


def _serve_refused(secure: dict[str, str], dsn: str, names: tuple[str, str]) -> str:
    """`pinledger serve` on this DSN stops at start: its one line of error, which holds
    what `check_store` (`pinledger doctor`'s check of the store) says too."""
    with pytest.raises(StoreRefusedError) as checked:
        check_store(dsn)
    prefix, schema = names
    done = run_pinledger(
        "serve",
        timeout=STACK_LIMIT_S,
        **secure,
        PINLEDGER_STORE_DSN=dsn,
        PINLEDGER_TOPIC_PREFIX=prefix,
        PINLEDGER_SCHEMA=schema,
        PINLEDGER_PORT="0",
        PINLEDGER_ADMIN_PORT="0",
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.startswith("pinledger serve:")]
    assert len(lines) == 1, done.stderr
    assert str(checked.value) in lines[0]
    for secret in {
        _password(dsn),
        _password(secure[STORES["postgres"]]),
        _password(secure[STORES["mariadb"]]),
    }:
        assert secret not in output
    return lines[0]


def test_postgres_refusals_stop_serve_at_start_with_one_line_each(
    secure: dict[str, str], names: tuple[str, str]
) -> None:
    dsn = secure[STORES["postgres"]]
    other_ca = Path(secure["PINLEDGER_SECURE_TLS_DIR"]) / "other-ca.pem"
    untrusted = _serve_refused(
        secure, _changed(dsn, sslmode="verify-full", sslrootcert=str(other_ca)), names
    )
    assert "Postgres refused the connection" in untrusted, untrusted
    assert "does not trust the server's certificate" in untrusted and "sslrootcert" in untrusted
    plaintext = _serve_refused(secure, _changed(dsn, sslmode="disable"), names)
    assert "takes TLS connections only" in plaintext and "sslmode=verify-full" in plaintext
    wrong = _serve_refused(secure, _changed(dsn, password="not-the-password"), names)
    assert "password was refused" in wrong and "PINLEDGER_STORE_DSN" in wrong, wrong
    assert "not-the-password" not in wrong


def test_mariadb_refusals_stop_serve_at_start_with_one_line_each(
    secure: dict[str, str], names: tuple[str, str]
) -> None:
    dsn = secure[STORES["mariadb"]]
    other_ca = Path(secure["PINLEDGER_SECURE_TLS_DIR"]) / "other-ca.pem"
    untrusted = _serve_refused(
        secure, _changed(dsn, **{"ssl-mode": "VERIFY_IDENTITY", "ssl-ca": str(other_ca)}), names
    )
    assert "MariaDB/MySQL refused the connection" in untrusted, untrusted
    assert "does not trust the server's certificate" in untrusted and "ssl-ca" in untrusted
    plaintext = _serve_refused(secure, _changed(dsn, **{"ssl-mode": "DISABLED"}), names)
    assert "without TLS" in plaintext and "ssl-mode=VERIFY_IDENTITY" in plaintext, plaintext
    wrong = _serve_refused(secure, _changed(dsn, password="not-the-password"), names)
    assert "login was refused" in wrong and "PINLEDGER_STORE_DSN" in wrong, wrong
    assert "TLS" not in wrong.partition("(")[0], wrong  # over TLS: the password alone


def _ready_postgres(server: ServerProcess) -> str:
    """/ready's store check, named by the store's kind (`postgres` here)."""
    try:
        with server.admin_get("/ready") as answer:
            body = answer.read()
    except urllib.error.HTTPError as not_ready:  # 503 while a dependency is down
        body = not_ready.read()
    check: str = json.loads(body)["checks"]["postgres"]
    return check


def test_a_password_changed_meanwhile_shows_on_ready_with_the_same_line(
    secure: dict[str, str], names: tuple[str, str], tmp_path: Path
) -> None:
    """The role's password is changed and its sessions ended behind the server's back:
    the pool's new connections are refused, and /ready says why, as the start would."""
    prefix, schema = names
    dsn = secure[STORES["postgres"]]
    changed = "changed-meanwhile"
    server = ServerProcess(
        prefix=prefix, schema=schema, settings=server_settings(**secure, PINLEDGER_STORE_DSN=dsn)
    )
    try:
        server.start(tmp_path)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"ALTER ROLE CURRENT_USER PASSWORD '{changed}'")
            try:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE usename = current_user AND pid <> pg_backend_pid()"
                )
                said = wait_for(
                    lambda: "refused" in (check := _ready_postgres(server)) and check, timeout=40
                )
            finally:
                admin.execute(f"ALTER ROLE CURRENT_USER PASSWORD '{_password(dsn)}'")
        assert said.startswith("down: StoreRefusedError: Postgres refused the connection: "), said
        assert "the password was refused" in said
        assert _password(dsn) not in said and changed not in said
    finally:
        server.stop()
        open_store(dsn, schema).drop()
    assert _password(dsn) not in server.log()


def test_a_refusal_after_the_start_reads_the_same_through_the_pool(secure: dict[str, str]) -> None:
    """A pool that cannot get a connection later (the password changed meanwhile, the
    certificate rotated) times out; its error says why the pool's connections were
    refused, as /ready's `postgres` check shows it."""
    dsn = secure[STORES["postgres"]]
    failures = ConnectFailures()
    with pytest.raises(psycopg.OperationalError):
        failures.connection_class().connect(_changed(dsn, password="not-the-password"))
    error = store_error(PoolTimeout("couldn't get a connection"), "reading", "s", failures.last)
    assert isinstance(error, StoreRefusedError)
    assert "Postgres refused the connection: the password was refused" in str(error)
    failures.connection_class().connect(dsn).close()
    assert failures.last is None


def test_doctor_stops_on_a_refusing_store_with_the_line_serve_would_say(
    secure: dict[str, str], names: tuple[str, str]
) -> None:
    dsn = _changed(secure[STORES["postgres"]], sslmode="disable")
    with pytest.raises(StoreRefusedError) as checked:
        check_store(dsn)
    done = run_pinledger(
        "doctor",
        timeout=STACK_LIMIT_S,
        **secure,
        PINLEDGER_STORE_DSN=dsn,
        PINLEDGER_TOPIC_PREFIX=names[0],
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [f"pinledger doctor: {checked.value}"]
    assert _password(dsn) not in done.stdout + done.stderr
