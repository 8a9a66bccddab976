"""Secrets stay secret (issue 25, part 6; docs/security.md): a server with known secrets
(the Kafka SASL password, on the secure Kafka; the admin password; the metrics token)
runs with debug logging, answers right and wrong passwords, serves every admin page,
and the tools run against it. No secret appears in any of what they print or answer:
the server's log, /metrics, /stats.txt, /health, /ready, the dashboard's pages, Thrift
error answers, the traces the server and `pinledger trace --otlp` export (to a
receiver in the test), and the output of `pinledger doctor`, `replay` and `migrate
--check`."""

from __future__ import annotations

import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from pinledger.idl import pinlater
from pinledger.service.security.password import hash_password_scrypt
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    run_pinledger,
)
from tests.integration.conftest import server_settings
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.secure_stack import STACK_LIMIT_S, sasl_password, secure_up

pytestmark = pytest.mark.integration

ADMIN_PASSWORD = "Adm1n-known-secret"
METRICS_TOKEN = "metrics-known-T0ken"


def _http(
    port: int, path: str, form: dict[str, str] | None = None, token: str | None = None
) -> str:
    """Status line, headers and body of an admin port answer, as one text."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data, headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return f"{r.status}\n{r.headers}\n{r.read().decode(errors='replace')}"
    except urllib.error.HTTPError as e:
        with e:
            return f"{e.code}\n{e.headers}\n{e.read().decode(errors='replace')}"


def test_no_secret_in_anything_the_server_or_the_tools_print_or_answer(
    names: tuple[str, str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    secure = secure_up()
    kafka_password = sasl_password(secure)
    secrets = {"the Kafka password": kafka_password, "the admin password": ADMIN_PASSWORD}
    secrets["the metrics token"] = METRICS_TOKEN
    prefix, schema = names
    env = {
        **secure,
        "PINLEDGER_ADMIN_PASSWORD_HASH": hash_password_scrypt(ADMIN_PASSWORD),
        # The tests' default password setting (PinLater's form) is replaced by scrypt's.
        "PINLEDGER_ADMIN_PASSWORD_SHA256": "",
        "PINLEDGER_ADMIN_SALT": "",
        "PINLEDGER_METRICS_TOKEN": METRICS_TOKEN,
        # Traces too, exported at once to the test's receiver.
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    server = ServerProcess(
        prefix=prefix,
        schema=schema,
        settings=server_settings(**env),
        # -v: debug logging, where a client library's configuration would show.
        command=(sys.executable, "-m", "pinledger", "-v", "serve"),
    )
    seen: dict[str, str] = {}
    try:
        server.start(tmp_path)
        client = server.client()
        client.createQueue(context(), "kept")
        request = pinlater.PinLaterEnqueueRequest(
            queueName="kept", jobs=[pinlater.PinLaterJob(body=b"x")]
        )
        [descriptor] = client.enqueueJobs(context(), request).jobDescriptors
        dequeue_until(client, "kept", 1)
        # The job's life exported while its queue exists (deleteQueue below ends it).
        tools = {"PINLEDGER_TOPIC_PREFIX": prefix, "PINLEDGER_SCHEMA": schema, **env}
        trace = ("trace", descriptor, "--otlp", "--server", f"127.0.0.1:{server.port}")
        done = run_pinledger(*trace, timeout=STACK_LIMIT_S, **tools)
        assert done.returncode == 0, done.stderr
        seen["pinledger trace --otlp"] = done.stdout + done.stderr
        for password in ("wrong-password", ADMIN_PASSWORD):
            try:
                client.deleteQueue(context(), "kept", password)
            except pinlater.PinLaterException as exc:
                seen[f"deleteQueue answer ({password == ADMIN_PASSWORD})"] = str(exc.message)
        client.close()
        port = server.admin_port
        for path in ("/metrics", "/stats.txt"):
            seen[path] = _http(port, path, token=METRICS_TOKEN)
            assert seen[path].startswith("200"), seen[path]
            seen[f"{path} without the token"] = _http(port, path)
        for path in ("/health", "/ready", "/", "/login", "/failures"):
            seen[path] = _http(port, path)
        seen["a wrong login"] = _http(port, "/login", {"password": "nope"})
        seen["a login"] = _http(port, "/login", {"password": ADMIN_PASSWORD})
        for args in (("doctor",), ("replay",), ("migrate", "--check"), ("-v", "doctor")):
            done = run_pinledger(*args, timeout=STACK_LIMIT_S, **tools)
            seen[f"pinledger {' '.join(args)}"] = done.stdout + done.stderr
    finally:
        server.stop()
    seen["the server's log"] = server.log_path.read_text() if server.log_path else ""
    assert "DEBUG" in seen["the server's log"]  # debug logging was on
    # The exported spans as bytes (protobuf holds strings as UTF-8): the server's RPC
    # spans and the job's exported life both arrived.
    exported = b"".join(receiver.bodies)
    span_names = sorted(
        {
            span.name
            for request in receiver.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        }
    )
    assert "pinlater/enqueueJobs" in span_names and descriptor.encode() in exported, span_names
    seen["the exported traces"] = exported.decode("utf-8", errors="replace")
    for where, text in seen.items():
        for what, secret in secrets.items():
            assert secret not in text, f"{what} appears in {where}"
