"""Fixtures for the chaos tests: the stack's three-broker Kafka cluster, the stack
script that crashes and restarts its servers, and the table the suite prints at the
end (fault, jobs, lost, duplicate runs, seconds to recover).

The tests start the cluster themselves (they fail, never skip, when that cannot be
done) and leave it running for later tests. They crash the stack's own PostgreSQL
too, so they need the stack's servers, not ones named by PINLEDGER_PG_DSN.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.report import ROWS, table
from tests.chaos.stage import Stage, staged

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "stack" / "stack.sh"
# Bounds, not expectations: a cold start formats three nodes and starts three JVMs.
STACK_CALL_LIMIT_S = 300


def stack(*args: str) -> str:
    """Run stack/stack.sh; its stdout, or the test fails with its stderr."""
    try:
        done = subprocess.run(
            ["bash", str(STACK), *args],
            capture_output=True,
            text=True,
            timeout=STACK_CALL_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"`stack.sh {' '.join(args)}` did not finish within {exc.timeout} s")
    if done.returncode != 0:
        pytest.fail(f"`stack.sh {' '.join(args)}` failed (exit {done.returncode}):\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="session")
def cluster() -> str:
    """The cluster's bootstrap list, from the export line `cluster up` prints."""
    out = stack("cluster", "up")
    head = "export PINLEDGER_KAFKA_CLUSTER="
    lines = [line for line in out.splitlines() if line.startswith(head)]
    assert lines, f"`stack.sh cluster up` printed no {head} line:\n{out}"
    return lines[-1][len(head) :]


@pytest.fixture
def stage(cluster: str, tmp_path: Path) -> Iterator[Stage]:
    """Two servers on the cluster and the queue QUEUE (tests/chaos/stage.py)."""
    with staged(cluster, tmp_path) as made:
        yield made


@pytest.fixture
def trio(cluster: str, tmp_path: Path) -> Iterator[Stage]:
    """The stage with three servers sharing the queue's partitions."""
    with staged(cluster, tmp_path, servers=3) as made:
        yield made


@pytest.fixture
def sharded_stage(cluster: str, tmp_path: Path) -> Iterator[Stage]:
    """The stage on two store shards: Postgres (home, "a") and MariaDB ("b"); the
    queue's four partitions are placed a, b, a, b."""
    with staged(cluster, tmp_path, sharded=True) as made:
        yield made


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if ROWS:
        terminalreporter.section("chaos: one fault at a time, under load")
        for line in table(ROWS):
            terminalreporter.write_line(line)
