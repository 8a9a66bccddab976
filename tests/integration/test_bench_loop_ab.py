"""`python -m bench.loop_ab` (issue 44's measure of one event loop against a thread per
connection) still runs: every mode's server answers every call of the load, the table
names each mode, and the topic it made is gone afterwards. No figure is checked."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pinledger.ledger.kafka import KafkaLog
from pinledger.service.testing.servers import ROOT

pytestmark = pytest.mark.integration


def test_each_mode_answers_the_load_and_the_topic_is_removed(kafka: KafkaLog) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.loop_ab",
            "--rounds",
            "1",
            "--calls",
            "40",
            "--concurrency",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for mode in ("threads", "asyncio", "uvloop"):
        row = re.search(rf"^{mode} +([\d.]+) +([\d.]+) +(\d+)$", run.stdout, re.MULTILINE)
        assert row is not None, f"no row for {mode}:\n{run.stdout}"
        assert int(row.group(3)) > 0, row.group(0)
    topic = re.search(r"topic (loop_ab_\w+)", run.stderr)
    assert topic is not None, run.stderr[:500]
    assert topic.group(1) not in kafka.topics()
