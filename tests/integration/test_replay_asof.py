"""`pinledger replay --as-of`: a queue's state at a past moment, rebuilt from the log,
matches what getJobCount said at that moment while the run was going on."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger.descriptor import parse
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    run_pinledger,
    wait_for,
)
from tests.integration.test_api import ack, count, enqueue, job

pytestmark = pytest.mark.integration

STATES = (0, 1, 2, 3)
PRIORITIES = (1, 2, 3)
HOUR_MS = 3_600_000


def now_ms() -> int:
    return int(time.time() * 1000)


def _counts(client: Any, queue: str) -> dict[tuple[str, int, bool], int]:
    """getJobCount for every state, priority, due and future (zeros left out)."""
    names = {0: "PENDING", 1: "IN_PROGRESS", 2: "SUCCEEDED", 3: "FAILED"}
    got = {}
    for state in STATES:
        for priority in PRIORITIES:
            for future in (False, True):
                n = count(client, queue, state, priority=priority, countFutureJobs=future)
                if n:
                    got[(names[state], priority, future)] = n
    return got


def _dequeue(queue: str, limit: int, dry: bool = False) -> Any:
    return p.PinLaterDequeueRequest(queueName=queue, limit=limit, dryRun=dry)


def dry_run(client: Any, queue: str) -> dict[str, bytes]:
    return dict(client.dequeueJobs(context(), _dequeue(queue, 100, dry=True)).jobs or {})


def _replay(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pinledger(
        "replay",
        *args,
        PINLEDGER_TOPIC_PREFIX=server.prefix,
        PINLEDGER_SCHEMA=server.schema,
    )


def _moment(client: Any, queue: str) -> tuple[int, dict[tuple[str, int, bool], int]]:
    """A moment between two phases: every earlier record is stamped before it and no
    later one is; and the counts getJobCount reports then."""
    time.sleep(0.02)
    moment = now_ms()
    time.sleep(0.02)
    return moment, _counts(client, queue)


def test_as_of_a_time_matches_the_counts_observed_then(client: Any, server: ServerProcess) -> None:
    queue = f"q_asof_{os.urandom(5).hex()}"
    client.createQueue(context(), queue)
    # Phase 1: jobs of three priorities, some not due for an hour; three dequeued: one
    # succeeds, one fails with an hour's retry delay, one stays in progress.
    urgent = enqueue(client, queue, *[job(b"u%d" % i, priority=1) for i in range(4)])
    normal = enqueue(client, queue, *[job(b"n%d" % i, priority=2) for i in range(3)])
    enqueue(client, queue, *[job(b"l%d" % i, priority=3) for i in range(2)])
    enqueue(
        client,
        queue,
        *[
            job(b"f%d" % i, priority=2, runAfterTimestampMillis=now_ms() + HOUR_MS)
            for i in range(2)
        ],
    )
    # Wait until the server serves every partition (a dry run sees all 9 due jobs), so
    # the one real dequeue takes the three urgent jobs.
    wait_for(lambda: len(dry_run(client, queue)) == 9)
    taken = list(client.dequeueJobs(context("w:1"), _dequeue(queue, 3)).jobs)
    assert len(taken) == 3
    assert set(taken) <= set(urgent)
    ack(client, queue, ok=[taken[0]], source="w:1")
    ack(client, queue, failed=[taken[1]], source="w:1", retryDelayMillis=HOUR_MS)
    first, observed_first = _moment(client, queue)

    # Phase 2: more of everything, so the log moves on past the moment.
    enqueue(client, queue, *[job(b"x%d" % i, priority=1) for i in range(3)])
    later = dequeue_until(client, queue, 5, limit=5, source="w:2")
    ack(client, queue, ok=list(later), source="w:2")
    second, observed_second = _moment(client, queue)
    assert observed_first != observed_second

    for moment, observed in ((first, observed_first), (second, observed_second)):
        answer = _replay(server, "--as-of", str(moment), "--queue", queue, "--json")
        assert answer.returncode == 0, answer.stderr
        report = json.loads(answer.stdout)
        replayed = {}
        for row in report["counts"]:
            for future in (False, True):
                n = row["future" if future else "due"]
                if n:
                    replayed[(row["state"], row["priority"], future)] = n
        assert replayed == observed, f"as of {moment}"
        assert report["now"] == moment

    # At the first moment: the due PENDING jobs in dequeue order (priority first).
    report = json.loads(_replay(server, "--as-of", str(first), "--queue", queue, "--json").stdout)
    due = [j["descriptor"] for j in report["due"]]
    assert (
        len(due)
        == observed_first[("PENDING", 1, False)]
        + observed_first[("PENDING", 2, False)]
        + observed_first[("PENDING", 3, False)]
    )
    keys = [(j["priority"], j["run_after"]) for j in report["due"]]
    assert keys == sorted(keys)
    assert set(due) >= set(normal) and not set(due) & set(taken)

    # Why the urgent job still waiting was dequeued before a normal one.
    (waiting,) = set(urgent) - set(taken)
    a, b = waiting, normal[0]
    explained = json.loads(
        _replay(server, "--as-of", str(first), "--queue", queue, "--json", "--explain", a, b).stdout
    )["explain"]
    assert explained["first"] == a
    assert "priority 1 is taken before priority 2" in explained["reason"]
    claims = {j["descriptor"]: j["next_claim"] for j in explained["jobs"]}
    assert claims[a] is not None and claims[a]["at"] > first
    assert claims[b] is None or claims[b]["at"] >= claims[a]["at"]

    human = _replay(server, "--as-of", str(first), "--queue", queue, "--explain", b, a)
    assert human.returncode == 0, human.stderr
    assert f"queue {queue} as of" in human.stdout
    assert "pending and due, in dequeue order" in human.stdout
    assert f"why: {a} before {b}: priority 1" in human.stdout


def test_as_of_an_offset_is_the_partition_then(client: Any, server: ServerProcess) -> None:
    queue = f"q_asof_{os.urandom(5).hex()}"
    client.createQueue(context(), queue)
    (d,) = enqueue(client, queue, job(b"one"))
    dequeue_until(client, queue, 1)
    parsed = parse(d)
    args = ["--queue", queue, "--partition", str(parsed.partition), "--json"]

    at_enqueue = json.loads(_replay(server, "--as-of", f"offset:{parsed.offset}", *args).stdout)
    assert [j["descriptor"] for j in at_enqueue["due"]] == [d]
    assert at_enqueue["counts"] == [{"state": "PENDING", "priority": 1, "due": 1, "future": 0}]
    after = json.loads(_replay(server, "--as-of", f"offset:{parsed.offset + 1}", *args).stdout)
    assert after["due"] == []
    assert [(c["state"], c["due"]) for c in after["counts"]] == [("IN_PROGRESS", 1)]


def test_as_of_says_what_is_wrong(server: ServerProcess) -> None:
    alone = _replay(server, "--json")
    assert alone.returncode == 2 and "go with --as-of" in alone.stderr
    no_queue = _replay(server, "--as-of", "5")
    assert no_queue.returncode == 2 and "exactly one --queue" in no_queue.stderr
    bad = _replay(server, "--as-of", "last tuesday", "--queue", "q")
    assert bad.returncode == 2 and "ISO-8601" in bad.stderr
    missing = _replay(server, "--as-of", "5", "--queue", "q_never_created")
    assert missing.returncode == 1 and "did not exist" in missing.stderr
