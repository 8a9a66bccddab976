"""Kafka that requires TLS and SASL (issue 25, docs/security.md), on the stack's secure
node (`bash stack/stack.sh secure up`, started here when it is not running: these
tests fail, never skip, when it cannot be): both adapters log in over SASL_SSL with
each mechanism and verify the broker; client certificates are required on the mTLS
listener; and every refusal (a wrong password, an untrusted broker, no client
certificate) is one clear line naming Kafka and what to check, with no secret in it.
A server serves PinLater calls with its ledger on that Kafka."""

from __future__ import annotations

import gc
import os
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pinledger.idl import pinlater
from pinledger.ledger.adapters import CLIENTS, LIBRDKAFKA, KafkaClientLog, open_log
from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.log import Append, KafkaSecurity, LogError, Position
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    run_pinledger,
)
from tests.integration.conftest import server_settings
from tests.integration.secure_stack import STACK_LIMIT_S, sasl_password, secure_up

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure() -> dict[str, str]:
    return secure_up()


def _sasl(
    secure: dict[str, str], mechanism: str = "SCRAM-SHA-512", **changes: Any
) -> KafkaSecurity:
    security = KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_username=secure["PINLEDGER_KAFKA_SASL_USERNAME"],
        sasl_password=sasl_password(secure),
        ssl_cafile=secure["PINLEDGER_KAFKA_SSL_CAFILE"],
    )
    return replace(security, **changes)


def _mtls(secure: dict[str, str], client: str | None = "client", ca: str = "ca") -> KafkaSecurity:
    tls = Path(secure["PINLEDGER_SECURE_TLS_DIR"])
    return KafkaSecurity(
        protocol="SSL",
        ssl_cafile=str(tls / f"{ca}.pem"),
        ssl_certfile=str(tls / f"{client}.pem") if client else "",
        ssl_keyfile=str(tls / f"{client}.key") if client else "",
    )


def _log(bootstrap: str, security: KafkaSecurity, client: str) -> KafkaClientLog:
    settings = KafkaSettings(
        bootstrap=bootstrap,
        client_id="security-test",
        security=security,
        append_timeout_ms=8000,
        # A refusal is certain after the first attempts: no need for the default 30 s.
        bootstrap_timeout_ms=10_000,
    )
    return open_log(settings, client)


def _round_trip(log: KafkaClientLog) -> None:
    """A topic made, a record appended and read back, the topic deleted."""
    topic = f"sec{uuid.uuid4().hex[:10]}"
    log.create_topic(topic, 1)
    try:
        [offset] = log.append([Append(topic, 0, b"over tls")])
        reader = log.reader([Position(topic, 0, offset)])
        try:
            records = []
            for _ in range(50):
                records = reader.poll(10, 200)
                if records:
                    break
        finally:
            reader.close()
        assert [r.value for r in records] == [b"over tls"]
    finally:
        log.delete_topic(topic)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
@pytest.mark.parametrize("client", CLIENTS)
def test_each_adapter_logs_in_over_sasl_ssl_with_each_mechanism(
    secure: dict[str, str], client: str, mechanism: str
) -> None:
    log = _log(secure["PINLEDGER_KAFKA"], _sasl(secure, mechanism), client)
    try:
        _round_trip(log)
    finally:
        log.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_certificate_signed_by_the_brokers_ca_gets_in(
    secure: dict[str, str], client: str
) -> None:
    log = _log(secure["PINLEDGER_SECURE_KAFKA_MTLS"], _mtls(secure), client)
    try:
        _round_trip(log)
    finally:
        log.close()


def _refused(bootstrap: str, security: KafkaSecurity, client: str) -> str:
    """What opening the log and creating a topic says when the broker refuses."""
    with pytest.raises(LogError) as refused:
        log = _log(bootstrap, security, client)
        try:
            log.create_topic(f"sec{uuid.uuid4().hex[:10]}", 1)
        finally:
            log.close()
    return str(refused.value)


# kafka-python's admin client leaves its sockets to the garbage collector when its
# constructor fails (a refused login): not pinledger's to close.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_refusals_say_what_to_check_and_never_the_password(secure: dict[str, str]) -> None:
    """On the default adapter: either adapter's first contact with Kafka is the same
    admin client (ledger/kafka/admin.py), so a refusal reads the same on both."""
    client = LIBRDKAFKA
    sasl = secure["PINLEDGER_KAFKA"]
    wrong = _refused(sasl, _sasl(secure, sasl_password="not-the-password"), client)
    assert "SASL" in wrong and "PINLEDGER_KAFKA_SASL_USERNAME" in wrong, wrong
    assert "not-the-password" not in wrong
    tls = Path(secure["PINLEDGER_SECURE_TLS_DIR"])
    untrusted = _refused(sasl, _sasl(secure, ssl_cafile=str(tls / "other-ca.pem")), client)
    assert "PINLEDGER_KAFKA_SSL_CAFILE" in untrusted, untrusted
    mtls = secure["PINLEDGER_SECURE_KAFKA_MTLS"]
    for security in (_mtls(secure, client=None), _mtls(secure, client="stranger")):
        said = _refused(mtls, security, client)
        assert "PINLEDGER_KAFKA_SSL_CERTFILE" in said, said
    gc.collect()  # the sockets left behind are closed here, where the warning is ignored


def _pinledger(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return run_pinledger(*args, timeout=STACK_LIMIT_S, **settings)


def test_a_server_serves_with_its_ledger_on_a_sasl_ssl_kafka(
    secure: dict[str, str], names: tuple[str, str], tmp_path: Path
) -> None:
    prefix, schema = names
    settings = server_settings(**secure)
    server = ServerProcess(prefix=prefix, schema=schema, settings=settings)
    try:
        server.start(tmp_path)
        client = server.client()
        client.createQueue(context(), "safe")
        request = pinlater.PinLaterEnqueueRequest(
            queueName="safe", jobs=[pinlater.PinLaterJob(body=b"over sasl_ssl")]
        )
        [descriptor] = client.enqueueJobs(context(), request).jobDescriptors
        got = dequeue_until(client, "safe", 1)
        assert got == {descriptor: b"over sasl_ssl"}
        client.close()
    finally:
        server.stop()
    password = sasl_password(secure)
    assert password not in server.log()
    done = _pinledger("doctor", PINLEDGER_TOPIC_PREFIX=prefix, **secure)
    assert done.returncode == 0, done.stdout + done.stderr
    assert password not in done.stdout + done.stderr


def test_a_wrong_password_stops_serve_at_start_with_one_line(
    secure: dict[str, str], names: tuple[str, str], tmp_path: Path
) -> None:
    prefix, schema = names
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n")
    env = {**secure, "PINLEDGER_KAFKA_SASL_PASSWORD_FILE": str(wrong)}
    done = _pinledger(
        "serve",
        PINLEDGER_TOPIC_PREFIX=prefix,
        PINLEDGER_SCHEMA=schema,
        PINLEDGER_PORT="0",
        PINLEDGER_ADMIN_PORT="0",
        **env,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("pinledger serve:")]
    assert len(lines) == 1, done.stderr
    assert "SASL" in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert "not-the-password" not in done.stdout + done.stderr
    assert os.environ.get("PINLEDGER_KAFKA_SASL_PASSWORD") is None
