"""`pinledger demo` end to end, as `make run` runs it: its own server, a queue, the
example worker with retries and a job that fails for good, counts, a job's trace, a
replay, and the next steps; on a topic prefix and schema of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import ROOT, free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def schema(config: Config) -> Iterator[str]:
    name = f"demo_{uuid.uuid4().hex[:10]}"
    yield name
    Store(config.pg_dsn, name).drop()


def test_the_demo_runs_a_worker_to_the_end_and_says_what_next(prefix: str, schema: str) -> None:
    env = dict(os.environ, PINLEDGER_TOPIC_PREFIX=prefix, PINLEDGER_SCHEMA=schema)
    done = subprocess.run(
        [sys.executable, "-m", "pinledger", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    assert f"Postgres schema {schema}, topic prefix {prefix!r}" in out
    pending = re.search(r"PENDING: (\d+) runnable now, (\d+) later", out)
    assert pending and int(pending[1]) + int(pending[2]) == 40, out
    # The example worker: flaky jobs retried, the corrupt image failed on every attempt.
    assert re.search(r"attempt 1 failed: ImageStoreTimeoutError.*; retry in", out)
    assert "attempt 3 failed: CorruptImageError" in out and "no attempts left" in out
    assert re.search(
        r"all 40 jobs finished: \d+ runs, \d+ failures retried, 1 failed for good", out
    )
    assert re.search(r"SUCCEEDED\s+4\s+35\s+39", out)
    assert re.search(r"FAILED\s+0\s+1\s+1", out)
    assert re.search(r"PENDING\s+0\s+0\s+0", out)
    # A retried job's history, as `pinledger trace` prints it.
    traced = re.search(r"5\. the history of (\S+) \(it failed once", out)
    assert traced, out
    assert re.search(r"Failed\s+attempt 1 .* -> PENDING \(2 attempts left\)\s+applied", out)
    assert re.search(r"Succeeded\s+attempt 2 .* -> SUCCEEDED", out)
    assert "identical to the live tables" in out
    assert "7. stopped the server\n" in out
    assert f"pinledger trace {traced.group(1)}" in out
    assert "pinledger client --mode get_job_count" in out
    assert "pinledger replay" in out
    assert "server log" not in out  # kept only on failure


def test_a_demo_that_cannot_start_its_server_says_what_failed_and_what_to_do() -> None:
    env = dict(
        os.environ,
        PINLEDGER_PG_DSN=f"postgresql://pinledger:pinledger@127.0.0.1:{free_port()}/pinledger",
        PINLEDGER_SCHEMA=f"demo_{uuid.uuid4().hex[:10]}",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pinledger", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert "demo FAILED while starting the server: the server exited during startup" in out
    assert "cannot connect to Postgres" in out
    assert "make stack-up" in out
    log = re.search(r"server log: (\S+)", out)
    assert log and os.path.exists(log[1])
    os.remove(log[1])
