"""Killing the projector mid-batch loses nothing and applies nothing twice."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from pinledger.ledger.events import Actor
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.service.config import Config
from tests.integration.workload import Workload

ROOT = Path(__file__).resolve().parents[2]


def _projector(config: Config, store: Store, prefix: str) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        PINLEDGER_KAFKA=config.kafka,
        PINLEDGER_PG_DSN=config.pg_dsn,
        PINLEDGER_SCHEMA=store.schema,
        PINLEDGER_TOPIC_PREFIX=prefix,
    )
    # Small batches: many transactions for the kill to land in.
    command = [sys.executable, "-m", "pinledger", "project", "--once", "--batch", "10"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _projected(store: Store, writer: LedgerWriter, partitions: int) -> int:
    # A partition has no offset until the projector has projected the queue's creation.
    return sum(store.offsets([(writer.topic("q"), p) for p in range(partitions)]).values())


def _wait_progress(
    store: Store, writer: LedgerWriter, proc: subprocess.Popen[bytes], before: int
) -> None:
    """Until the projector committed a batch beyond `before`, or exited, or 60 s passed."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if _projected(store, writer, 3) > before:
            return
        time.sleep(0.002)


def test_sigkill_mid_batch_then_restart_gives_the_same_tables(
    config: Config, writer: LedgerWriter, kafka: KafkaLog, prefix: str, store: Store, scratch: Store
) -> None:
    writer.create_queue("q", 3, 0, Actor(source="test"))
    workload = Workload(writer, "q", 3, seed=21)
    workload.run(1500)
    ends = [kafka.end_offset(writer.topic("q"), p) for p in range(3)]

    rng = random.Random(1)
    partial_kills = 0
    for round_ in range(8):
        before = _projected(store, writer, 3)
        proc = _projector(config, store, prefix)
        # Kill only once this run has committed something: a blind sleep lands before the
        # first commit on a slow machine (start-up) or after the last on a fast one.
        _wait_progress(store, writer, proc, before)
        time.sleep(0 if round_ == 0 else rng.uniform(0, 0.3))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        done = _projected(store, writer, 3)
        if proc.returncode == -signal.SIGKILL and 0 < done < sum(ends):
            partial_kills += 1
    assert partial_kills > 0, "no kill landed while the projector was half way"

    finisher = _projector(config, store, prefix)
    _, err = finisher.communicate(timeout=300)
    assert finisher.returncode == 0, err.decode()

    for partition, expected in enumerate(workload.jobs):
        assert store.partition_jobs("q", partition) == expected
    # The replay holds every event exactly once; the live timeline equals it row for
    # row, so the kills neither lost an event nor applied one twice.
    report = replay(store, scratch, kafka, prefix, Scope())
    assert report.events == workload.events_written
    assert report.identical, report.diffs
