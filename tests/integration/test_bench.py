"""The benchmark still runs end to end and prints every row (tiny counts; no figure
is checked: timings on a shared machine prove nothing)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pinledger.ledger.kafka import KafkaLog
from pinledger.service.testing.servers import ROOT

pytestmark = pytest.mark.integration

SETUP_ROWS = (
    "machine",
    "python",
    "kafka",
    "postgres",
    "postgres synchronous_commit",
    "pinledger kafka client",
    "kafka-python / confluent-kafka / psycopg / thriftpy2",
    "peer",
    "partitions per queue",
    "concurrency",
    "batch sizes",
)
RESULT_ROWS = (
    "enqueue, 1 job per call",
    "enqueue, 100 jobs per call",
    "completed (dequeue + piggybacked ack), batch 1",
    "completed (dequeue + piggybacked ack), batch 50",
    "dequeue latency p50 (1 client, batch 1)",
    "dequeue latency p99 (1 client, batch 1)",
    "dequeue + piggybacked ack p50 (1 client)",
    "dequeue + piggybacked ack p99 (1 client)",
    "dequeue + ack p99 under load",
    "enqueue -> first dequeue p50",
    "enqueue -> first dequeue p99",
    "replay (verify, one process per core)",
    "replay into a scratch projection",
)
# Rows where PgQueuer ran the same workload: they end with a ratio.
PEER_ROWS = RESULT_ROWS[:4]
# The CPU per job table (read from /proc): every group of both systems.
CPU_ROWS = (
    "CPU us per job",
    "pinledger: server",
    "pinledger: load generator (bench process)",
    "pinledger: postgres (every process)",
    "pinledger: kafka (broker JVM)",
    "pinledger: total",
    "PgQueuer: PgQueuer + load generator (bench process)",
    "PgQueuer: postgres (every process)",
    "PgQueuer: total",
)


def test_smoke_run_prints_the_whole_table(kafka: KafkaLog) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    for name in SETUP_ROWS + RESULT_ROWS + CPU_ROWS:
        assert any(line.startswith(name) for line in lines), f"no row {name!r}:\n{run.stdout}"
    for name in PEER_ROWS:
        row = next(line for line in lines if line.startswith(name))
        assert row.rstrip().endswith("x"), f"no pinledger/peer ratio in {row!r}"
    assert "synchronous_commit" in run.stdout
    assert "replay differs" not in run.stderr
    # Progress went to stderr while it ran.
    assert "enqueue, 1 job per call:" in run.stderr
    # It removed what it created.
    prefix = re.search(r"topics (bench\w+\.)\*", run.stderr)
    assert prefix is not None, run.stderr[:500]
    assert not any(t.startswith(prefix.group(1)) for t in kafka.topics())
