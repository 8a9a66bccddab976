"""`pinledger serve` processes for tests, and a thriftpy2 PinLater client for them."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thriftpy2.rpc import make_client
from thriftpy2.transport import TCyFramedTransportFactory

from pinledger.idl import pinlater

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, timeout_s: float = 20, host: str = "127.0.0.1") -> None:
    """Wait until something accepts connections on `port`; RuntimeError past `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout_s:g} s")


def connect(port: int, host: str = "127.0.0.1", timeout_ms: int = 30_000) -> Any:
    return make_client(
        pinlater.PinLater,
        host,
        port,
        trans_factory=TCyFramedTransportFactory(),
        timeout=timeout_ms,
    )


def describe(exc: BaseException) -> str:
    """What a client saw, on one line: the PinLater error code and message, or the
    transport error (the chaos suite's and the failover benchmark's failed calls)."""
    if isinstance(exc, pinlater.PinLaterException):
        code = pinlater.ErrorCode._VALUES_TO_NAMES.get(exc.errorCode, exc.errorCode)
        return f"PinLaterException {code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def context(source: str = "tests:host") -> Any:
    return pinlater.RequestContext(source=source, requestId="r1")


@dataclass
class ServerProcess:
    """One server process on its own ports; shares prefix and schema with its peers."""

    prefix: str
    schema: str
    settings: Mapping[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    admin_port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    # What starts the server, and where: the checkout's `python -m pinledger` by
    # default; the wheel test runs an installed `pinledger` outside the checkout.
    command: Sequence[str] = (sys.executable, "-m", "pinledger", "serve")
    cwd: Path = ROOT

    def start(self, log_dir: Path) -> ServerProcess:
        env = dict(os.environ)
        env.update(
            PINLEDGER_TOPIC_PREFIX=self.prefix,
            PINLEDGER_SCHEMA=self.schema,
            PINLEDGER_PORT=str(self.port),
            PINLEDGER_ADMIN_PORT=str(self.admin_port),
            PINLEDGER_SERVER_ID=f"test-{self.port}",
        )
        env.update(self.settings)
        self.log_path = log_dir / f"server-{self.port}.log"
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                list(self.command),
                cwd=self.cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"pinledger serve exited:\n{self.log()}")
            try:
                with self.admin_get("/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"pinledger serve not healthy after {timeout}s:\n{self.log()}")

    def admin_get(self, path: str, timeout: float = 10) -> Any:
        """GET an admin path; over https (its certificate not checked: a test's own
        server) when the server has PINLEDGER_TLS_CERTFILE."""
        if not self.settings.get("PINLEDGER_TLS_CERTFILE"):
            return urllib.request.urlopen(
                f"http://127.0.0.1:{self.admin_port}{path}", timeout=timeout
            )
        unchecked = ssl.create_default_context()
        unchecked.check_hostname = False
        unchecked.verify_mode = ssl.CERT_NONE
        return urllib.request.urlopen(
            f"https://127.0.0.1:{self.admin_port}{path}", timeout=timeout, context=unchecked
        )

    def log(self) -> str:
        """The whole log: a search must see the start-up lines, which a busy server's
        later lines push out of any tail."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = 5000) -> str:
        """The log's end, for a failure message."""
        return self.log()[-chars:]

    def client(self) -> Any:
        return connect(self.port)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 20) -> None:
    """SIGTERM, then SIGKILL when it has not stopped within `grace_s`; returns once it
    has exited."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running(servers: list[ServerProcess], log_dir: Path) -> Iterator[list[ServerProcess]]:
    try:
        for server in servers:
            server.start(log_dir)
        yield servers
    finally:
        for server in servers:
            server.stop()


def wait_for(predicate: Any, timeout: float = 30, pause: float = 0.1) -> Any:
    """Poll until `predicate()` is truthy; returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(pause)


def dequeue_until(
    client: Any, queue: str, count: int, limit: int = 100, timeout: float = 30, **request: Any
) -> dict[str, bytes]:
    """Dequeue until `count` jobs arrived (a server serves a new queue's partitions once
    it owns them, which takes a moment after createQueue)."""
    got: dict[str, bytes] = {}
    source = request.pop("source", "tests:host")

    def more() -> bool:
        answer = client.dequeueJobs(
            context(source),
            pinlater.PinLaterDequeueRequest(queueName=queue, limit=limit, **request),
        )
        got.update(answer.jobs or {})
        return len(got) >= count

    wait_for(more, timeout, pause=0.1)
    return got


def run_pinledger(
    *args: str, timeout: float = 120, **settings: str
) -> subprocess.CompletedProcess[str]:
    """`pinledger <args>` from the checkout, with `settings` (PINLEDGER_... variables)
    over the environment; its output captured as text, its exit status not checked."""
    return subprocess.run(
        [sys.executable, "-m", "pinledger", *args],
        cwd=ROOT,
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
