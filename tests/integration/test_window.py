"""The scale benchmark in small (bench/scale.py): a server whose ready window is far
smaller than the backlog holds no more than the window in memory, whatever the
backlog, and serves the whole backlog, in order within each partition
(docs/decisions/0014-ready-window.md). The memory figure checked is the count of jobs
the owner holds (/metrics: pinledger_ready_jobs_held), not a timing."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger.descriptor import parse
from pinledger.service.testing.servers import ServerProcess, context, wait_for
from tests.integration.conftest import Names
from tests.integration.test_api import ack, count
from tests.integration.test_operations import new_queue, serving

pytestmark = pytest.mark.integration

WINDOW = 30
PARTITIONS = 2
BACKLOG = 4000


def held(server: ServerProcess) -> float:
    url = f"http://127.0.0.1:{server.admin_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(r"^pinledger_ready_jobs_held (\S+)$", text, re.MULTILINE)
    assert found is not None, "no pinledger_ready_jobs_held gauge"
    return float(found.group(1))


def test_a_backlog_far_beyond_the_window_is_held_bounded_and_served_whole(
    names: Names, tmp_path: Path
) -> None:
    settings = {"PINLEDGER_READY_WINDOW": str(WINDOW), "PINLEDGER_PARTITIONS": str(PARTITIONS)}
    with serving(names, tmp_path, **settings) as (server, client):
        queue = new_queue(client)
        enqueued: list[str] = []
        for _ in range(BACKLOG // 1000):
            request = p.PinLaterEnqueueRequest(
                queueName=queue, jobs=[p.PinLaterJob(body=b"x" * 512) for _ in range(1000)]
            )
            enqueued += client.enqueueJobs(context(), request).jobDescriptors
        wait_for(lambda: count(client, queue, 0) == BACKLOG, timeout=60)
        assert 0 < held(server) <= WINDOW * PARTITIONS

        served: list[str] = []

        def drain() -> bool:
            answer = client.dequeueJobs(
                context(), p.PinLaterDequeueRequest(queueName=queue, limit=100)
            )
            got = list(answer.jobs or ())
            if got:
                ack(client, queue, ok=got)
                served.extend(got)
                assert held(server) <= WINDOW * PARTITIONS
            return len(served) >= BACKLOG

        wait_for(drain, timeout=120, pause=0.01)
        assert sorted(served) == sorted(enqueued)
        for partition in range(PARTITIONS):
            mine = [d for d in served if parse(d).partition == partition]
            assert mine == sorted(mine, key=lambda d: parse(d).local_id)
        wait_for(lambda: count(client, queue, 2) == BACKLOG, timeout=60)
