"""getJobHistory and `pinledger trace` on a job's full life: a failure with a retry
delay, a claim timeout, a stale ack from the timed-out worker, and a success."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pinledger.cli.trace import fetch_history
from pinledger.client.client import PinLaterClient
from pinledger.idl import pinlater as p
from pinledger.ledger.descriptor import parse
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.state import JobState
from pinledger.projections.history import JobHistory, Outcome
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import (
    ROOT,
    ServerProcess,
    context,
    dequeue_until,
    running,
    wait_for,
)
from tests.integration.conftest import server_settings
from tests.integration.test_api import ack, enqueue, error_of, job, lookup

pytestmark = pytest.mark.integration

W1, W2, W3 = "worker:host-1", "worker:host-2", "worker:host-3"
RETRY_DELAY_MS = 1000


@pytest.fixture(scope="module")
def traced(
    kafka: KafkaLog, config: Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, str, str]]:
    """A server with a 2 s claim timeout and one job taken through its whole life:
    (server, queue, descriptor)."""
    tag = uuid.uuid4().hex[:10]
    server = ServerProcess(
        prefix=f"trace{tag}.",
        schema=f"trace_{tag}",
        settings=server_settings(PINLEDGER_CLAIM_TIMEOUT_S="2"),
    )
    with running([server], tmp_path_factory.mktemp("trace")):
        client = server.client()
        try:
            yield server, *_life_of_a_job(client)
        finally:
            client.close()
    for topic in kafka.topics():
        if topic.startswith(server.prefix):
            kafka.delete_topic(topic)
    Store(config.pg_dsn, server.schema).drop()


def _life_of_a_job(client: Any) -> tuple[str, str]:
    queue = f"q_{uuid.uuid4().hex[:10]}"
    client.createQueue(context(), queue)
    (d,) = enqueue(client, queue, job(b"payload", numAttemptsAllowed=3, customStatus="new"))
    # Attempt 1 fails, asking for a retry after a delay.
    assert set(dequeue_until(client, queue, 1, source=W1)) == {d}
    ack(
        client,
        queue,
        failed=[d],
        source=W1,
        retryDelayMillis=RETRY_DELAY_MS,
        appendCustomStatus="|boom",
    )
    # Attempt 2, after the delay, is never acked: its claim times out.
    assert set(dequeue_until(client, queue, 1, source=W2)) == {d}
    wait_for(lambda: lookup(client, d)[d].jobState == JobState.PENDING, 20)
    # The timed-out worker acks late: the ledger records it, rejected.
    ack(client, queue, ok=[d], source=W2, appendCustomStatus="|late")
    # Attempt 3 succeeds.
    assert set(dequeue_until(client, queue, 1, source=W3)) == {d}
    ack(client, queue, ok=[d], source=W3, appendCustomStatus="|ok")
    return queue, d


def _history(server: ServerProcess, d: str, at: int | None = None) -> JobHistory:
    with PinLaterClient(f"127.0.0.1:{server.port}", source="tests:trace") as client:
        return fetch_history(client, parse(d), at)


def test_trace_shows_every_step_in_order_with_its_verdict(
    traced: tuple[ServerProcess, str, str],
) -> None:
    server, _, d = traced
    history = _history(server, d)
    steps = [(s.action, s.source, s.attempt, s.state_after, s.applied) for s in history.steps]
    assert steps == [
        ("Enqueued", "tests:host", 0, JobState.PENDING, True),
        ("Claimed", W1, 1, JobState.IN_PROGRESS, True),
        ("Failed", W1, 1, JobState.PENDING, True),
        ("Claimed", W2, 2, JobState.IN_PROGRESS, True),
        ("TimedOut", steps[4][1], 2, JobState.PENDING, True),
        ("Succeeded", W2, 2, JobState.PENDING, False),
        ("Claimed", W3, 3, JobState.IN_PROGRESS, True),
        ("Succeeded", W3, 3, JobState.SUCCEEDED, True),
    ]
    stale = history.steps[5]
    assert stale.reason == "success ack: job is PENDING, not IN_PROGRESS"
    assert [s.attempts_remaining_after for s in history.steps] == [3, 3, 2, 2, 1, 1, 1, 1]
    assert history.steps[2].detail["retry_delay_ms"] == RETRY_DELAY_MS
    assert [s.status_change and s.status_change.text for s in history.steps] == [
        "new",
        None,
        "|boom",
        None,
        None,
        "|late",
        None,
        "|ok",
    ]
    claims = [s.claim for s in history.steps if s.action == "Claimed"]
    assert len(set(claims)) == 3
    assert all(s.server for s in history.steps)
    assert [s.offset for s in history.steps] == sorted(s.offset for s in history.steps)
    assert history.job is not None and history.job.state is JobState.SUCCEEDED
    assert history.job.custom_status == "new|boom|ok"


def test_latency_breakdown_per_attempt_adds_up(traced: tuple[ServerProcess, str, str]) -> None:
    server, _, d = traced
    history = _history(server, d)
    outcomes = [(a.number, a.outcome) for a in history.attempts]
    assert outcomes == [(1, Outcome.FAILED), (2, Outcome.TIMED_OUT), (3, Outcome.SUCCEEDED)]
    first, second, third = history.attempts
    assert first.retry_delay_ms == RETRY_DELAY_MS
    # Attempt 2 could not be claimed before the delay was over.
    assert second.due_at == first.ended_at + RETRY_DELAY_MS  # type: ignore[operator]
    assert second.claimed_at >= second.due_at
    # The claim timed out no earlier than the 2 s timeout; all of it was lost.
    assert second.running_ms is not None and second.running_ms >= 2000
    assert second.timeout_lost_ms == second.running_ms
    assert second.retry_delay_ms == 0
    assert third.retry_delay_ms is None and first.timeout_lost_ms == third.timeout_lost_ms == 0
    assert history.initial_delay_ms is not None and history.enqueued_at is not None
    assert history.finished_at is not None and history.finished_at == third.ended_at
    total = history.initial_delay_ms + sum(
        a.queued_ms + (a.running_ms or 0) + (a.retry_delay_ms or 0) for a in history.attempts
    )
    assert total == history.finished_at - history.enqueued_at


def test_history_at_an_offset_is_the_job_as_of_that_step(
    traced: tuple[ServerProcess, str, str],
) -> None:
    server, _, d = traced
    full = _history(server, d)
    timeout = full.steps[4]
    then = _history(server, d, timeout.offset)
    assert [s.action for s in then.steps] == [
        "Enqueued",
        "Claimed",
        "Failed",
        "Claimed",
        "TimedOut",
    ]
    assert then.job is not None
    assert (then.job.state, then.job.attempts_remaining, then.job.claim) == (
        JobState.PENDING,
        1,
        None,
    )
    assert then.attempts[-1].outcome is Outcome.TIMED_OUT
    before = _history(server, d, full.steps[0].offset - 1)
    assert before.steps == () and before.job is None


def test_history_errors_are_lookups_errors(traced: tuple[ServerProcess, str, str]) -> None:
    server, queue, _ = traced
    client = server.client()
    try:

        def history(text: str) -> Any:
            request = p.PinLaterJobHistoryRequest(jobDescriptor=text)
            return client.getJobHistory(context(), request)

        def lookup_jobs(text: str) -> Any:
            request = p.PinLaterLookupJobRequest(jobDescriptors=[text])
            return client.lookupJobs(context(), request)

        for text in (
            "not-a-descriptor",
            f"{queue}:s0:p1",
            "nosuchqueue:s0:p1:0",
            f"{queue}:s99:p1:0",
        ):
            got = error_of(lambda t=text: history(t))
            want = error_of(lambda t=text: lookup_jobs(t))
            assert (got.errorCode, got.message) == (want.errorCode, want.message), text
        # A job the ledger never held: an empty history, not an error.
        unknown = history(f"{queue}:s0:p1:999999000")
        assert unknown.steps == [] and unknown.job is None
    finally:
        client.close()


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pinledger",
            "trace",
            *args,
            "--server",
            f"127.0.0.1:{server.port}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_prints_the_trace_for_people_and_as_json(
    traced: tuple[ServerProcess, str, str],
) -> None:
    server, _, d = traced
    human = _cli(server, d)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    step_lines = [line for line in lines if "@" in line and "attempt" in line]
    assert [line.split()[3] for line in step_lines] == [
        "Enqueued",
        "Claimed",
        "Failed",
        "Claimed",
        "TimedOut",
        "Succeeded",
        "Claimed",
        "Succeeded",
    ]
    assert "REJECTED: success ack: job is PENDING, not IN_PROGRESS" in step_lines[5]
    assert f"by {W2}" in step_lines[5]
    assert any("#2 timed out" in line and "lost to timeout" in line for line in lines)
    assert any(line.startswith("totals:") and "enqueue to finish" in line for line in lines)

    as_json = _cli(server, d, "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["descriptor"] == d
    assert [s["action"] for s in data["steps"]][-3:] == ["Succeeded", "Claimed", "Succeeded"]
    assert data["steps"][5]["applied"] is False
    assert [a["outcome"] for a in data["attempts"]] == ["failed", "timed out", "succeeded"]
    assert data["job"]["state"] == "SUCCEEDED"

    offset = data["steps"][1]["offset"]
    at = json.loads(_cli(server, d, "--json", "--at", str(offset)).stdout)
    assert at["as_of_offset"] == offset
    assert at["job"]["state"] == "IN_PROGRESS" and len(at["steps"]) == 2
    at_human = _cli(server, d, "--at", str(offset))
    assert f"as of offset {offset}" in at_human.stdout and "state: IN_PROGRESS" in at_human.stdout


def test_cli_says_what_is_wrong(traced: tuple[ServerProcess, str, str]) -> None:
    server, queue, _ = traced
    bad = _cli(server, "garbage")
    assert bad.returncode == 2 and "pinledger trace:" in bad.stderr and "descriptor" in bad.stderr
    missing = _cli(server, "nosuchqueue:s0:p1:0")
    assert missing.returncode == 2 and "QUEUE_NOT_FOUND" in missing.stderr
    unknown = _cli(server, f"{queue}:s0:p1:999999000")
    assert unknown.returncode == 1 and "no history" in unknown.stdout


def test_a_history_whose_rows_were_dropped_is_read_from_the_log(
    traced: tuple[ServerProcess, str, str], config: Config
) -> None:
    server, queue, d = traced
    job_d = parse(d)
    before = _history(server, d)
    before_json = json.loads(_cli(server, d, "--json").stdout)
    timeout_offset = before.steps[4].offset
    before_then = _history(server, d, timeout_offset)

    store = Store(config.pg_dsn, server.schema)
    try:
        # A cut-off three days ahead: every partition so far is past it.
        future = int(time.time() * 1000) + 3 * 86_400_000
        assert store.drop_day_partitions_before(future) >= 1
        assert store.job_events(queue, job_d.partition, job_d.local_id) == []

        assert _history(server, d) == before
        assert json.loads(_cli(server, d, "--json").stdout) == before_json
        assert _history(server, d, timeout_offset) == before_then

        # The server's projector writes new events into a partition made again.
        client = server.client()
        try:
            (fresh,) = enqueue(client, queue, job(b"after the drop"))
        finally:
            client.close()
        fresh_d = parse(fresh)
        # (getJobHistory waits until the server has projected the enqueue.)
        assert [s.action for s in _history(server, fresh).steps] == ["Enqueued"]
        rows = store.job_events(queue, fresh_d.partition, fresh_d.local_id)
        assert [r.type for r in rows] == ["enq"]
    finally:
        store.close()
