"""The benchmark still runs end to end and prints every row (tiny counts; no figure
is checked: timings on a shared machine prove nothing), on each store, as a user
without Go runs it: PgQueuer only, the setup table saying why River was skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinledger.ledger.kafka import KafkaLog
from pinledger.service.testing.servers import ROOT
from tests.contract.store_fixtures import each_kind, store_dsn

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
# The CPU per job table (read from /proc): every group of both systems; pinledger's
# database is its store's.
CPU_ROWS = (
    "CPU us per job",
    "pinledger: server",
    "pinledger: load generator (bench process)",
    "pinledger: kafka (broker JVM)",
    "pinledger: total",
    "PgQueuer: PgQueuer + load generator (bench process)",
    "PgQueuer: postgres (every process)",
    "PgQueuer: total",
)
DATABASE_ROWS = {
    "postgres": "pinledger: postgres (every process)",
    "mysql": "pinledger: mariadb/mysql (every mariadbd, mysqld)",
}


def without_go(tmp_path: Path) -> dict[str, str]:
    """The environment with no `go` on PATH and an empty cache: no River to build."""
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "go").exists()]
    return {**os.environ, "PATH": os.pathsep.join(path), "XDG_CACHE_HOME": str(tmp_path)}


@each_kind
def test_smoke_run_prints_the_whole_table(kafka: KafkaLog, store_kind: str, tmp_path: Path) -> None:
    env = without_go(tmp_path)
    if store_kind == "mysql":
        env["PINLEDGER_STORE_DSN"] = store_dsn("mysql")
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    database = DATABASE_ROWS[store_kind]
    for name in (*SETUP_ROWS, *RESULT_ROWS, *CPU_ROWS, database, "CPU per job, whole system"):
        assert any(line.startswith(name) for line in lines), f"no row {name!r}:\n{run.stdout}"
    other = next(row for kind, row in DATABASE_ROWS.items() if kind != store_kind)
    assert not any(line.startswith(other) for line in lines), run.stdout
    for name in PEER_ROWS:
        row = next(line for line in lines if line.startswith(name))
        assert row.rstrip().endswith("x"), f"no pinledger/peer ratio in {row!r}"
    # Without Go, River is left out of the default run and the setup table says why.
    peer = next(line for line in lines if line.startswith("peer "))
    assert "PgQueuer" in peer and "River skipped: Go is not installed" in peer, peer
    assert not any(line.startswith("River") for line in lines), run.stdout
    # pinledger's whole-system CPU per job over PgQueuer's, one ratio per phase (n/a
    # where the smoke run's few jobs took less than a clock tick of PgQueuer's CPU).
    ratio = next(line for line in lines if line.startswith("pinledger/PgQueuer"))
    assert len(re.findall(r"\d+\.\d\dx|n/a", ratio)) == 4, ratio
    assert "synchronous_commit" in run.stdout
    assert "replay differs" not in run.stderr
    # Progress went to stderr while it ran.
    assert "enqueue, 1 job per call:" in run.stderr
    # It removed what it created.
    prefix = re.search(r"topics (bench\w+\.)\*", run.stderr)
    assert prefix is not None, run.stderr[:500]
    assert not any(t.startswith(prefix.group(1)) for t in kafka.topics())


def test_sizing_measures_kafka_and_store_bytes_per_job(kafka: KafkaLog) -> None:
    """`python -m bench.sizing`, docs/deploying.md's source, still measures through a real
    server and prints its two tables (tiny counts; the figures prove nothing here), and
    removes what it created."""
    args = ["--jobs", "200", "--bodies", "100", "--shapes", "batched", "--no-mysql", "--no-memory"]
    run = subprocess.run(
        [sys.executable, "-m", "bench.sizing", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split() for line in run.stdout.splitlines()]
    kafka_row = next(r for r in rows if r[:3] == ["postgres", "batched", "100"] and len(r) > 7)
    enqueue_bytes, whole_life = (int(v.replace(",", "")) for v in kafka_row[3:5])
    # A job's whole life (enqueue, claim, ack) costs more log than its enqueue alone, and
    # a 100-byte body costs at least its base64 form.
    assert 100 * 4 // 3 <= enqueue_bytes < whole_life, kafka_row
    states = {r[3]: r for r in rows if r[:3] == ["postgres", "batched", "100"] and len(r) == 7}
    assert {"PENDING", "SUCCEEDED"} <= set(states), run.stdout
    assert int(states["SUCCEEDED"][-1].replace(",", "")) > 0, run.stdout
    assert not [t for t in kafka.topics() if t.startswith("sizing")], "sizing left topics"
