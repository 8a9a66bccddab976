"""The Thrift and admin ports over TLS (issue 25 parts 4 and 5, docs/security.md), on
real servers with the secure stack's CA and certificates (`stack.sh secure up` makes
them):

- two servers that require client certificates serve the Python client, its Worker
  (whose dequeues through one server are forwarded to the other over mutual TLS) and
  `pinledger client`;
- a client without a certificate, with one of another CA, or speaking plaintext is
  refused at once, each with one log line, and holds no connection slot;
- the Apache Thrift library's TSSLSocket works against it (interop);
- a TLS client on a plaintext port is told so; TLS files that cannot be used stop
  `pinledger serve` with one line;
- the admin port speaks https with the same certificate (no client certificate asked):
  probes, scrapes, and the dashboard's login, whose cookie is then Secure; plain http
  is refused with one log line; `serve --processes` serves both ports the same way.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import ssl
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinledger.client import ClientError, Job, JobContext, PinLaterClient, Tls, Worker
from pinledger.client.jobs import JobState
from pinledger.ledger.kafka import KafkaLog
from pinledger.projections.pg.store import Store
from pinledger.service.security.tls import HANDSHAKE_TIMEOUT_S
from pinledger.service.testing.servers import ServerProcess, run_pinledger, running, wait_for
from tests.integration.conftest import ADMIN_PASSWORD, server_settings
from tests.integration.secure_stack import secure_up
from tests.integration.test_interop import run_python_client
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

JOBS = 20
# A framed Thrift call's first bytes (size, then the strict binary protocol's version):
# what a plaintext client sends first.
_PLAINTEXT_CALL = b"\x00\x00\x00\x20\x80\x01\x00\x01" + bytes(32)


@pytest.fixture(scope="module")
def tls_dir() -> Path:
    return Path(secure_up()["PINLEDGER_SECURE_TLS_DIR"])


@pytest.fixture(scope="module")
def pair(
    tls_dir: Path, kafka: KafkaLog, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ServerProcess]]:
    """Two servers of one ledger whose Thrift ports require a client certificate of the
    stack's CA; each presents its own to the other when it forwards a dequeue."""
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"tls{tag}.", f"tls_{tag}"
    settings = server_settings(
        PINLEDGER_TLS_CERTFILE=str(tls_dir / "broker.pem"),
        PINLEDGER_TLS_KEYFILE=str(tls_dir / "broker.key"),
        PINLEDGER_TLS_CLIENT_CAFILE=str(tls_dir / "ca.pem"),
        PINLEDGER_TLS_CAFILE=str(tls_dir / "ca.pem"),
        PINLEDGER_PARTITIONS="4",
        # Every dequeue asks the peer: the test needs the forwards.
        PINLEDGER_FORWARD_QUIET_MS="0",
    )
    logs = tmp_path_factory.mktemp("tls")
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=settings) for _ in range(2)]
    try:
        with running(servers, logs):
            yield servers
    finally:
        for topic in kafka.topics():
            if topic.startswith(prefix):
                kafka.delete_topic(topic)
        Store(stack_settings().pg_dsn, schema).drop()


def _client(
    server: ServerProcess, tls: Tls | None, retries: int = 2, timeout_s: float = 30.0
) -> PinLaterClient:
    return PinLaterClient(f"127.0.0.1:{server.port}", tls=tls, retries=retries, timeout_s=timeout_s)


def _trusted(tls_dir: Path, who: str = "client") -> Tls:
    """A client that trusts the stack's CA, with the certificate `who` (or none)."""
    if not who:
        return Tls(cafile=str(tls_dir / "ca.pem"))
    return Tls(
        cafile=str(tls_dir / "ca.pem"),
        certfile=str(tls_dir / f"{who}.pem"),
        keyfile=str(tls_dir / f"{who}.key"),
    )


def _metric(server: ServerProcess, name: str) -> float:
    with server.admin_get("/metrics") as answer:
        text = answer.read().decode()
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found[1]) if found else 0.0


def _owns_some(server: ServerProcess, queue: str) -> bool:
    return f"serving {server.prefix}q.{queue}[" in server.log()


def test_the_client_and_its_worker_work_over_mutual_tls(
    pair: list[ServerProcess], tls_dir: Path
) -> None:
    """Jobs enqueued through one server are all worked by a Worker that talks to that
    server alone: those of the other server's partitions come through forwarded
    dequeues, over TLS with the servers' own certificates."""
    first, second = pair
    queue = f"tls_{uuid.uuid4().hex[:8]}"
    with _client(first, _trusted(tls_dir)) as client:
        client.create_queue(queue)
        wait_for(lambda: _owns_some(first, queue) and _owns_some(second, queue), timeout=60)
        descriptors = client.enqueue(queue, [Job(f"job-{i}".encode()) for i in range(JOBS)])
        done = threading.Event()
        seen: list[bytes] = []

        def handle(job: JobContext) -> None:
            seen.append(job.body)
            if len(seen) >= JOBS:
                done.set()

        worker = Worker(client, queue, handle, concurrency=2, idle_backoff=(0.02, 0.2))
        thread = worker.start()
        try:
            assert done.wait(60), f"worked {len(seen)} of {JOBS}"
        finally:
            worker.stop()
            thread.join(60)
        assert sorted(seen) == sorted(f"job-{i}".encode() for i in range(JOBS))
        wait_for(
            lambda: (
                {info.state for info in client.lookup(descriptors).values()} == {JobState.SUCCEEDED}
            ),
            timeout=30,
        )
    assert "(TLS, client certificates required)" in first.log()


def test_pinledger_client_speaks_tls(pair: list[ServerProcess], tls_dir: Path) -> None:
    queue = f"tool_{uuid.uuid4().hex[:8]}"
    where = ["--port", str(pair[0].port), "--queue", queue]
    tls = [
        "--tls_cafile",
        str(tls_dir / "ca.pem"),
        "--tls_certfile",
        str(tls_dir / "client.pem"),
        "--tls_keyfile",
        str(tls_dir / "client.key"),
    ]
    for mode, extra in (("create", []), ("enqueue", ["--num_queries", "3"])):
        done = run_pinledger("client", "--mode", mode, *where, *tls, *extra)
        assert done.returncode == 0, done.stderr
    counted = run_pinledger("client", "--mode", "get_job_count", *where, *tls)
    assert counted.returncode == 0, counted.stderr
    assert re.search(r"\b3\b", counted.stdout), counted.stdout

    plain = run_pinledger("client", "--mode", "get_job_count", *where, "--timeout", "5")
    assert plain.returncode == 1
    assert plain.stderr.startswith("pinledger client: ") and "Traceback" not in plain.stderr


@pytest.mark.parametrize(
    ("who", "logged"),
    [
        ("", "no client certificate"),
        ("stranger", "certificate verify failed"),
    ],
)
def test_a_client_without_a_trusted_certificate_is_refused(
    pair: list[ServerProcess], tls_dir: Path, who: str, logged: str
) -> None:
    server = pair[0]
    refused_before = server.log().count(logged)
    client = _client(server, _trusted(tls_dir, who), retries=0, timeout_s=20)
    with client, pytest.raises(ClientError):
        client.queue_names()
    wait_for(lambda: server.log().count(logged) > refused_before, timeout=10)


def test_a_plaintext_client_is_closed_at_once(pair: list[ServerProcess]) -> None:
    """Its first bytes fail the handshake: the server closes the connection then, not
    when the handshake's time runs out, and the slot is free again."""
    server = pair[0]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(_PLAINTEXT_CALL)
        # Shorter than the handshake's limit: an answer within it is the refusal.
        sock.settimeout(HANDSHAKE_TIMEOUT_S / 2)
        received = b""
        # The end of the stream, or a reset (the server closed with bytes unread).
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(4096):
                received += chunk
    # At most a TLS alert came back, then the end of the stream; never a Thrift answer.
    assert not received.startswith(b"\x00\x00"), received
    wait_for(lambda: "not TLS (a plaintext client?)" in server.log(), timeout=10)
    wait_for(lambda: _metric(server, "pinledger_connections_open") == 0, timeout=10)


def test_the_apache_thrift_tls_client_interoperates(
    pair: list[ServerProcess], tls_dir: Path, tmp_path: Path
) -> None:
    run_python_client(
        pair[0],
        tmp_path,
        "the Apache Thrift TLS client",
        str(tls_dir / "ca.pem"),
        str(tls_dir / "client.pem"),
        str(tls_dir / "client.key"),
    )


def test_a_tls_client_on_a_plaintext_port_is_told_so(server: ServerProcess, tls_dir: Path) -> None:
    client = _client(server, _trusted(tls_dir, ""), retries=0, timeout_s=20)
    with client, pytest.raises(ClientError):
        client.queue_names()
    wait_for(lambda: "a TLS handshake on a plaintext port" in server.log(), timeout=10)


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"PINLEDGER_TLS_CERTFILE": "broker.pem"}, "needs both PINLEDGER_TLS_CERTFILE"),
        (
            {"PINLEDGER_TLS_CERTFILE": "broker.pem", "PINLEDGER_TLS_KEYFILE": "client.key"},
            "key values mismatch",
        ),
        (
            {"PINLEDGER_TLS_CERTFILE": "broker.pem", "PINLEDGER_TLS_KEYFILE": "missing.key"},
            "no such file, or not readable",
        ),
    ],
)
def test_tls_files_that_cannot_be_used_stop_serve_with_one_line(
    tls_dir: Path, files: dict[str, str], said: str
) -> None:
    settings = {name: str(tls_dir / file) for name, file in files.items()}
    done = run_pinledger("serve", timeout=60, **settings)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert lines[0].startswith("pinledger serve: ")


def _https(tls_dir: Path, port: int) -> http.client.HTTPSConnection:
    """A browser's view: the stack's CA trusted, the name 127.0.0.1 checked."""
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.pem"))
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)


def test_the_admin_port_speaks_https_and_its_login_cookie_is_secure(
    pair: list[ServerProcess], tls_dir: Path
) -> None:
    server = pair[0]
    conn = _https(tls_dir, server.admin_port)
    try:
        for path in ("/health", "/metrics", "/queues"):
            conn.request("GET", path)
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200, path
        form = urllib.parse.urlencode({"password": ADMIN_PASSWORD})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        conn.request("POST", "/login", body=form, headers=headers)
        answer = conn.getresponse()
        answer.read()
        assert answer.status in (302, 303), answer.status
        cookie = answer.getheader("Set-Cookie") or ""
        assert "; Secure" in cookie and "HttpOnly" in cookie, cookie
    finally:
        conn.close()

    plain = http.client.HTTPConnection("127.0.0.1", server.admin_port, timeout=10)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        plain.request("GET", "/health")
        plain.getresponse().read()
    plain.close()
    wait_for(lambda: "(the admin port speaks https)" in server.log(), timeout=10)


def _page(conn: http.client.HTTPSConnection, cookie: str) -> str:
    conn.request("GET", "/queues", headers={"Cookie": cookie})
    answer = conn.getresponse()
    return answer.read().decode()


def test_a_logout_on_one_server_ends_the_session_on_the_other(
    pair: list[ServerProcess], tls_dir: Path
) -> None:
    here, there = (_https(tls_dir, server.admin_port) for server in pair)
    try:
        form = urllib.parse.urlencode({"password": ADMIN_PASSWORD})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        here.request("POST", "/login", body=form, headers=headers)
        answer = here.getresponse()
        answer.read()
        cookie = (answer.getheader("Set-Cookie") or "").split(";")[0]
        assert cookie.startswith("pinledger_session="), cookie
        page = _page(there, cookie)  # another server takes the session
        assert "log out" in page
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert csrf, page

        form = urllib.parse.urlencode({"csrf": csrf[1]})
        here.request("POST", "/logout", body=form, headers={**headers, "Cookie": cookie})
        answer = here.getresponse()
        answer.read()
        assert answer.status in (302, 303)

        # The copied cookie is refused everywhere, not only dropped by the browser.
        assert "log out" not in _page(there, cookie)
        assert "log out" not in _page(here, cookie)
    finally:
        here.close()
        there.close()


def test_processes_serve_tls_on_both_ports(
    tls_dir: Path, names: tuple[str, str], tmp_path: Path
) -> None:
    """The host's admin port asks its processes' over https (trusting exactly their
    certificate) and the shared Thrift port speaks TLS in every process."""
    prefix, schema = names
    server = ServerProcess(
        prefix=prefix,
        schema=schema,
        settings=server_settings(
            PINLEDGER_PROCESSES="2",
            PINLEDGER_TLS_CERTFILE=str(tls_dir / "broker.pem"),
            PINLEDGER_TLS_KEYFILE=str(tls_dir / "broker.key"),
            PINLEDGER_TLS_CAFILE=str(tls_dir / "ca.pem"),
        ),
    )
    server.start(tmp_path)  # healthy: /health over https said so
    try:
        with server.admin_get("/health") as answer:
            health = answer.read().decode()
        assert '"0"' in health and '"1"' in health, health
        with _client(server, _trusted(tls_dir, "")) as client:
            client.create_queue("both")
            assert "both" in client.queue_names()
    finally:
        server.stop()
