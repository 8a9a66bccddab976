"""`pinledger client` run as a command against a real server: every mode, the load
modes' reports, Ctrl-C on an endless run, and the one-line errors with PinLater's
ErrorCode and a non-zero exit."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from pinledger.client import Job, PinLaterClient
from pinledger.service.testing.servers import (
    ROOT,
    ServerProcess,
    free_port,
    run_pinledger,
    wait_for,
)
from tests.integration.conftest import ADMIN_PASSWORD

pytestmark = pytest.mark.integration


def tool(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pinledger("client", "--port", str(server.port), *args)


def ok(server: ServerProcess, *args: str) -> str:
    done = tool(server, *args)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def count(server: ServerProcess, queue: str, state: str, *extra: str) -> int:
    out = ok(server, "--mode", "get_job_count", "--queue", queue, "--job_state", state, *extra)
    match = re.match(r"(\d+) ", out)
    assert match, out
    return int(match.group(1))


@pytest.fixture
def pl(server: ServerProcess) -> Iterator[PinLaterClient]:
    with PinLaterClient(f"127.0.0.1:{server.port}", source="tool-tests:host") as client:
        yield client


@pytest.fixture
def queue(pl: PinLaterClient) -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    pl.create_queue(name)
    return name


def test_create_then_the_queue_is_listed(server: ServerProcess) -> None:
    name = f"t_{uuid.uuid4().hex[:12]}"
    assert f"created queue {name}" in ok(server, "--mode", "create", "--queue", name)
    # The mode may also come first, without --mode.
    wait_for(lambda: f"  {name}\n" in ok(server, "get_queue_names"), timeout=30, pause=0.5)


def test_enqueue_load_reports_and_the_jobs_arrive(server: ServerProcess, queue: str) -> None:
    out = ok(
        server,
        "--mode",
        "enqueue",
        "--queue",
        queue,
        "--num_queries",
        "20",
        "--batch_size",
        "5",
        "--concurrency",
        "2",
        "--priority",
        "2",
    )
    assert "summary: enqueue 20 calls (100 jobs)" in out
    assert re.search(r"latency p50 [\d.]+ ms  p90 [\d.]+ ms  p99 [\d.]+ ms", out), out
    assert "errors 0" in out
    assert count(server, queue, "PENDING") == 100
    assert count(server, queue, "0", "--priority", "2") == 100
    assert count(server, queue, "0", "--priority", "1") == 0


def test_delayed_enqueue_counts_as_future(server: ServerProcess, queue: str) -> None:
    out = ok(
        server, "--mode", "enqueue", "--queue", queue, "--delay_ms", "3600000", "--body", "later"
    )
    listed = re.search(r"enqueued (\S+)$", out, re.MULTILINE)
    assert listed and listed[1].startswith(f"{queue}:s"), out
    looked_up = ok(server, "lookup", "--job_descriptor", listed[1])
    assert "b'later'" in looked_up and re.search(r"state\s+PENDING", looked_up)
    assert count(server, queue, "PENDING") == 0
    assert count(server, queue, "PENDING", "--count_future_jobs", "true") == 1
    assert count(server, queue, "PENDING", "--count_future_jobs") == 1


def test_check_dequeue_shows_jobs_without_claiming_them(
    server: ServerProcess, queue: str, pl: PinLaterClient
) -> None:
    [descriptor] = pl.enqueue(queue, [Job(b"look but do not touch")])

    def seen() -> str | None:
        out = ok(server, "--mode", "check_dequeue", "--queue", queue, "--batch_size", "10")
        return out if "jobs available for dequeue: yes" in out else None

    out = wait_for(seen, timeout=30, pause=0.5)
    assert descriptor in out and "look but do not touch" in out
    assert count(server, queue, "PENDING") == 1
    assert count(server, queue, "IN_PROGRESS") == 0


def test_dequeue_acks_successes_and_failures_on_the_next_call(
    server: ServerProcess, queue: str
) -> None:
    ok(server, "enqueue", "--queue", queue, "--num_queries", "4", "--batch_size", "10")
    ok(server, "enqueue", "--queue", queue, "--attempts", "1", "--num_queries", "1")
    total = 41

    summaries: list[str] = []

    def all_done() -> bool:
        out = ok(
            server,
            "--mode",
            "dequeue",
            "--queue",
            queue,
            "--num_queries",
            "6",
            "--batch_size",
            "8",
            "--concurrency",
            "2",
            "--dequeue_success_percent",
            "50",
        )
        summaries.append(out)
        return count(server, queue, "SUCCEEDED") + count(server, queue, "FAILED") == total

    wait_for(all_done, timeout=60, pause=0.2)
    acked = [
        tuple(map(int, m.groups()))
        for out in summaries
        for m in [re.search(r"acked (\d+) succeeded, (\d+) failed", out)]
        if m
    ]
    assert len(acked) == len(summaries)
    succeeded = count(server, queue, "SUCCEEDED")
    assert sum(s for s, _ in acked) == succeeded
    # Failed jobs with an attempt left went back to PENDING and were dequeued again.
    assert sum(f for _, f in acked) >= count(server, queue, "FAILED")
    assert succeeded > 0 and count(server, queue, "FAILED") > 0
    assert count(server, queue, "IN_PROGRESS") == 0


def test_scan_retry_failed_and_delete_jobs(
    server: ServerProcess, queue: str, pl: PinLaterClient
) -> None:
    descriptors = pl.enqueue(
        queue, [Job(f"doomed {i}".encode(), attempts_allowed=1) for i in (1, 2, 3)]
    )
    got = wait_for(lambda: pl.dequeue(queue, 10), timeout=30)
    pl.ack(queue, failed=[j.descriptor for j in got])
    assert count(server, queue, "FAILED") == 3

    out = ok(server, "--mode", "scan", "--queue", queue, "--job_state", "FAILED", "--limit", "2")
    assert out.startswith("2 FAILED job(s)")
    assert sum(d in out for d in descriptors) == 2
    assert "more: --continuation" in out

    out = ok(server, "retry_failed", "--queue", queue, "--limit", "2", "--attempts", "3")
    assert "retried 2 FAILED job(s) of priority 1" in out
    assert count(server, queue, "PENDING") == 2
    assert count(server, queue, "FAILED") == 1

    out = ok(server, "delete_jobs", "--queue", queue, "--job_state", "PENDING")
    assert "deleted 2 PENDING job(s) of priority 1" in out
    assert count(server, queue, "PENDING") == 0


def test_lookup_prints_the_job_and_a_missing_one_fails(
    server: ServerProcess, queue: str, pl: PinLaterClient
) -> None:
    [descriptor] = pl.enqueue(queue, [Job(b"hello tool", priority=3, attempts_allowed=4)])
    out = ok(server, "--mode", "lookup", "--job_descriptor", descriptor)
    assert f"job {descriptor}" in out
    assert re.search(r"state\s+PENDING", out)
    assert re.search(r"priority\s+3", out)
    assert "4 of 4 left" in out
    assert "b'hello tool'" in out

    missing = descriptor.rsplit(":", 1)[0] + ":987654321"
    done = tool(server, "lookup", "--job_descriptor", f"{descriptor},{missing}")
    assert done.returncode == 1
    assert f"job {missing}: not found" in done.stdout
    assert "hello tool" in done.stdout


def test_delete_queue_needs_the_password(server: ServerProcess, queue: str) -> None:
    done = tool(server, "delete_queue", "--queue", queue, "--password", "wrong")
    assert done.returncode == 1
    assert "PASSWORD_INVALID" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

    out = ok(server, "delete_queue", "--queue", queue, "--password", ADMIN_PASSWORD)
    assert f"deleted queue {queue}" in out
    done = tool(server, "get_job_count", "--queue", queue)
    assert done.returncode == 1 and "QUEUE_NOT_FOUND" in done.stderr


def test_an_unknown_queue_is_a_one_line_error(server: ServerProcess) -> None:
    missing = f"nope_{uuid.uuid4().hex[:8]}"
    for args in (
        ("get_job_count", "--queue", missing),
        ("enqueue", "--queue", missing, "--num_queries", "5"),
        ("dequeue", "--queue", missing, "--num_queries", "5"),
    ):
        done = tool(server, *args)
        assert done.returncode == 1, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("pinledger client: QUEUE_NOT_FOUND: ")
        assert missing in lines[0]


def test_bad_arguments_are_refused_before_any_call(server: ServerProcess) -> None:
    done = tool(server, "enqueue", "--queue", "q", "--dequeue_success_percent", "101")
    assert done.returncode == 2
    assert "--dequeue_success_percent must be 0-100" in done.stderr
    done = tool(server, "frobnicate", "--queue", "q")
    assert done.returncode == 2 and "unknown mode 'frobnicate'" in done.stderr
    done = tool(server, "enqueue", "--queue", "bad-name!")
    assert done.returncode == 1 and "QUEUE_NAME_INVALID" in done.stderr


def test_an_endless_run_reports_every_second_and_sums_up_on_ctrl_c(
    server: ServerProcess, queue: str
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pinledger",
            "client",
            "--port",
            str(server.port),
            "--mode",
            "enqueue",
            "--queue",
            queue,
            "--num_queries",
            "-1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"the tool ended early: {proc.wait()} {proc.stderr}"
            lines.append(line)
            if sum(line.startswith("[") for line in lines) >= 2:
                break
        periodic = [line for line in lines if line.startswith("[")]
        assert len(periodic) >= 2, lines
        assert re.search(r"calls/s\s+[\d,.]+\s+jobs/s\s+[\d,.]+\s+p50\s+[\d.]+ ms", periodic[0])
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()  # closes the pipes too: left open, a later test warns
    assert proc.returncode == 0, err
    match = re.search(r"summary: enqueue ([\d,]+) calls", out)
    assert match, out
    issued = int(match.group(1).replace(",", ""))
    assert issued > 0
    assert count(server, queue, "PENDING") == issued


def test_no_server_is_a_one_line_error() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pinledger",
            "client",
            "get_queue_names",
            "--port",
            str(free_port()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("pinledger client: cannot reach the server: ")
    assert "is `pinledger serve` running there?" in line
