"""The any-language promise: stock Apache Thrift clients, on code generated from
thrift/pinlater.thrift by the real `thrift` compiler, run a job's whole life against a
running pinledger server.

- Java: `thrift --gen java` + libthrift (TFramedTransport over TSocket, TBinaryProtocol),
  client tests/interop/java/InteropClient.java compiled here with javac.
- Python: `thrift --gen py` + the PyPI `thrift` library (not thriftpy2, which the
  server uses), client tests/interop/py_client.py.

Each client creates a queue (twice; an invalid name must raise PinLaterException with
QUEUE_NAME_INVALID), enqueues 3 jobs (priorities 1..3), dequeues them, acks them as
succeeded with a custom status and looks them up; it prints one JSON object per job
and the test checks them. A missing tool fails the test, saying what to install.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Protocol

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
IDL = REPO / "thrift" / "pinlater.thrift"
INTEROP = REPO / "tests" / "interop"
THRIFT_JAR = Path("/usr/share/java/thrift.jar")
# Debian's libthrift-java depends on libslf4j-java; the simple binding silences
# SLF4J's "no binding" warning.
SLF4J_SIMPLE = Path("/usr/share/java/slf4j-simple.jar")
JOBS = 3
# A client waits up to 30 s for its dequeues, plus connection and JVM start-up.
CLIENT_TIMEOUT_S = 120.0
TOOL_TIMEOUT_S = 120.0


class Server(Protocol):
    """What the `server` fixture yields: a running `pinledger serve`."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    def log(self) -> str: ...


def _need_command(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` is not on PATH: apt-get install {package} (.ci/run installs it)",
            pytrace=False,
        )
    return path


def _need_file(path: Path, package: str) -> None:
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: apt-get install {package} (.ci/run installs it)", pytrace=False
        )


def _run(cmd: list[str], what: str, timeout: float, server: Server | None = None) -> str:
    """Run `cmd`; return its stdout, or fail the test with everything it printed (and the
    tail of the server's log, when a client against `server` failed)."""
    server_log = "" if server is None else f"\n--- server log (tail) ---\n{server.log()}"
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{what} did not finish in {timeout:.0f} s: {cmd}\n"
            f"--- stdout ---\n{exc.stdout!r}\n--- stderr ---\n{exc.stderr!r}{server_log}",
            pytrace=False,
        )
    if done.returncode != 0:
        pytest.fail(
            f"{what} exited {done.returncode}: {cmd}\n"
            f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}{server_log}",
            pytrace=False,
        )
    return done.stdout


def _generate(lang: str, out: Path) -> Path:
    thrift = _need_command("thrift", "thrift-compiler")
    out.mkdir(parents=True)
    _run(
        [thrift, "--gen", lang, "-out", str(out), str(IDL)], f"thrift --gen {lang}", TOOL_TIMEOUT_S
    )
    return out


def _queue(lang: str) -> str:
    return f"interop_{lang}_{uuid.uuid4().hex[:10]}"


def _check_jobs(stdout: str, queue: str, lang: str) -> None:
    """Every job SUCCEEDED with the client's status, its body and priority intact."""
    jobs: list[dict[str, Any]] = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert len(jobs) == JOBS, f"expected {JOBS} jobs from the {lang} client, got:\n{stdout}"
    assert sorted(job["body"] for job in jobs) == [f"{lang}-{i}" for i in range(1, JOBS + 1)]
    assert len({job["descriptor"] for job in jobs}) == JOBS, stdout
    descriptor_re = re.compile(rf"{re.escape(queue)}:s(\d+):p(\d+):(\d+)")
    for job in jobs:
        match = descriptor_re.fullmatch(job["descriptor"])
        assert match, f"descriptor {job['descriptor']!r} is not {queue}:s<n>:p<prio>:<id>"
        # Job "<lang>-<i>" was enqueued with priority i.
        assert int(match[2]) == int(job["body"].rsplit("-", 1)[1]), job
        assert job["state"] == "SUCCEEDED", job
        assert f"done-by-{lang}" in job["customStatus"], job


def test_java_client(server: Server, tmp_path: Path) -> None:
    javac = _need_command("javac", "openjdk-17-jdk-headless")
    java = _need_command("java", "openjdk-17-jre-headless")
    _need_file(THRIFT_JAR, "libthrift-java")
    gen = _generate("java", tmp_path / "gen-java")
    classes = tmp_path / "classes"
    sources = sorted(str(p) for p in gen.rglob("*.java"))
    _run(
        [
            javac,
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(classes),
            "-cp",
            str(THRIFT_JAR),
            *sources,
            str(INTEROP / "java" / "InteropClient.java"),
        ],
        "javac",
        TOOL_TIMEOUT_S,
    )
    classpath = [str(classes), str(THRIFT_JAR)]
    if SLF4J_SIMPLE.is_file():
        classpath.append(str(SLF4J_SIMPLE))
    queue = _queue("java")
    stdout = _run(
        [java, "-cp", ":".join(classpath), "InteropClient", server.host, str(server.port), queue],
        "the Java client",
        CLIENT_TIMEOUT_S,
        server,
    )
    _check_jobs(stdout, queue, "java")


def test_python_client(server: Server, tmp_path: Path) -> None:
    run_python_client(server, tmp_path, "the Python client")


def run_python_client(server: Server, tmp_path: Path, what: str, *tls: str) -> None:
    """The Apache Thrift Python client's round trip against `server`, over TLS when
    `tls` gives its CA (and a client certificate and key): every job as expected."""
    if importlib.util.find_spec("thrift") is None:
        pytest.fail(
            "the Apache Thrift Python library (`import thrift`) is not installed: "
            "pip install thrift (pinledger's dev extra: `make install`)",
            pytrace=False,
        )
    gen = _generate("py", tmp_path / "gen-py")
    queue = _queue("python")
    stdout = _run(
        [
            sys.executable,
            str(INTEROP / "py_client.py"),
            str(gen),
            server.host,
            str(server.port),
            queue,
            *tls,
        ],
        what,
        CLIENT_TIMEOUT_S,
        server,
    )
    _check_jobs(stdout, queue, "python")
