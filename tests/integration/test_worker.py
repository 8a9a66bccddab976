"""The worker framework against a real server whose claims time out after 3 s: retries
follow the policy, heartbeats keep a long job's claim, acks ride on dequeues and are never
lost (not at shutdown, not while the server is down), a crashing handler never kills the
worker, and chained and cron-like jobs reschedule themselves."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from pinledger.client import (
    Ack,
    Checkpoint,
    DequeuedJob,
    Job,
    JobInfo,
    JobState,
    PinLaterClient,
    after_ms,
)
from pinledger.client.examples.enqueue_jobs import thumbnail_jobs
from pinledger.client.examples.thumbnail_worker import make_thumbnail
from pinledger.client.job_context import JobContext
from pinledger.client.retry import RetryPolicy, constant, exponential, linear, never
from pinledger.client.worker import Worker
from pinledger.ledger.kafka import KafkaLog
from pinledger.projections.pg.store import Store
from pinledger.service.testing.servers import ROOT, ServerProcess, running, wait_for
from tests.integration.conftest import server_settings
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

CLAIM_TIMEOUT_S = 3


@pytest.fixture(scope="module")
def server(kafka: KafkaLog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose claims time out after 3 s, on its own prefix and schema."""
    tag = uuid.uuid4().hex[:10]
    process = ServerProcess(
        prefix=f"wrk{tag}.",
        schema=f"wrk_{tag}",
        settings=server_settings(PINLEDGER_CLAIM_TIMEOUT_S=str(CLAIM_TIMEOUT_S)),
    )
    with running([process], tmp_path_factory.mktemp("worker-server")):
        yield process
    for topic in kafka.topics():
        if topic.startswith(process.prefix):
            kafka.delete_topic(topic)
    Store(stack_settings().pg_dsn, process.schema).drop()


@pytest.fixture
def pl(server: ServerProcess) -> Iterator[PinLaterClient]:
    with PinLaterClient(f"127.0.0.1:{server.port}", source=f"worker-tests:{uuid.uuid4()}") as c:
        yield c


@pytest.fixture
def queue(pl: PinLaterClient) -> str:
    return new_queue(pl)


def new_queue(pl: PinLaterClient, prefix: str = "w") -> str:
    """A new queue, once the server serves it.

    Works around a server bug seen in these tests: a queue created while the owner's
    consumer group rebalances can be left out of the assignment (no partition of it is
    ever owned, its jobs never dequeued) until the next rebalance. A probe job shows
    whether the queue is served; if not, creating another queue causes a rebalance.
    """
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    pl.create_queue(name)
    probe = pl.enqueue_one(name, b"probe", priority=3)
    for _ in range(6):
        try:
            wait_for(lambda: pl.dequeue(name, 1, dry_run=True), 10)
            break
        except AssertionError:
            pl.create_queue(f"nudge_{uuid.uuid4().hex[:12]}")
    else:
        raise AssertionError(f"the server never served queue {name}")
    assert pl.delete_jobs(name, JobState.PENDING, priority=3, body_regex="^probe$") == 1
    wait_for(lambda: probe not in pl.lookup([probe]), 10)
    return name


def all_visible(pl: PinLaterClient, queue: str, count: int) -> None:
    """Wait until the server serves every partition of a new queue (a dry run claims
    nothing)."""
    wait_for(lambda: len(pl.dequeue(queue, 100, dry_run=True)) == count, 30)


def make_worker(
    pl: PinLaterClient, queue: str, handler: Callable[[JobContext], str | None], **options: Any
) -> Worker:
    options.setdefault("claim_timeout_s", CLAIM_TIMEOUT_S)
    options.setdefault("idle_backoff", (0.05, 0.3))
    options.setdefault("retry", constant(0))
    return Worker(pl, queue, handler, **options)


@contextmanager
def working(worker: Worker) -> Iterator[Worker]:
    """The worker running on a thread; stopped (and fully flushed) on exit."""
    thread = worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(60)
        assert not thread.is_alive(), "the worker did not stop within 60 s"


def settled(pl: PinLaterClient, descriptors: Iterable[str]) -> dict[str, JobInfo] | None:
    """The jobs once none is PENDING or IN_PROGRESS any more, else None."""
    jobs = pl.lookup(list(descriptors))
    finished = (JobState.SUCCEEDED, JobState.FAILED)
    return jobs if all(j.state in finished for j in jobs.values()) else None


# -- retries ----------------------------------------------------------------------------


def test_retries_follow_the_policy_until_the_attempts_run_out(
    pl: PinLaterClient, queue: str
) -> None:
    policy = exponential(0.4, factor=2, cap_s=1.0)  # 400 ms, 800 ms, then the 1 s cap
    runs: list[tuple[int, int, float]] = []

    def always_fails(job: JobContext) -> None:
        runs.append((job.attempt, job.attempts_remaining, time.time()))
        raise ValueError(f"boom on attempt {job.attempt}")

    d = pl.enqueue_one(queue, b"x", attempts_allowed=4)
    worker = make_worker(pl, queue, always_fails, retry=policy)
    with working(worker):
        info = wait_for(lambda: settled(pl, [d]), 30)[d]

    assert [(attempt, remaining) for attempt, remaining, _ in runs] == [
        (1, 4),
        (2, 3),
        (3, 2),
        (4, 1),
    ]
    # No attempt ran before the delay its predecessor's failure asked for.
    for (attempt, _, started), (_, _, next_started) in pairwise(runs):
        assert next_started - started >= (policy(attempt) or 0) / 1000
    assert (info.state, info.attempts_remaining) == (JobState.FAILED, 0)
    assert info.custom_status.splitlines() == [
        "attempt 1 failed: ValueError: boom on attempt 1; retry in 0.4 s",
        "attempt 2 failed: ValueError: boom on attempt 2; retry in 0.8 s",
        "attempt 3 failed: ValueError: boom on attempt 3; retry in 1 s",
        "attempt 4 failed: ValueError: boom on attempt 4; no attempts left",
    ]
    assert (worker.processed, worker.retried, worker.failed, worker.succeeded) == (4, 3, 1, 0)


@pytest.mark.parametrize(
    ("policy", "delay_ms"),
    [
        (constant(90), 90_000),
        (linear(40, cap_s=600), 40_000),
        # jitter 0.5 with the random source at 0.5 takes a quarter off 100 s
        (exponential(100, cap_s=600, jitter=0.5, rng=lambda: 0.5), 75_000),
    ],
)
def test_a_failure_is_acked_with_the_policy_delay(
    pl: PinLaterClient, queue: str, policy: RetryPolicy, delay_ms: int
) -> None:
    def fails(job: JobContext) -> None:
        raise RuntimeError("try later")

    d = pl.enqueue_one(queue, b"x", attempts_allowed=3)
    with working(make_worker(pl, queue, fails, retry=policy)):
        info = wait_for(lambda: (i := pl.lookup([d])[d]).attempts_remaining == 2 and i, 30)

    assert info.state is JobState.PENDING
    assert info.run_after_ms is not None and info.updated_at_ms is not None
    assert info.run_after_ms - info.updated_at_ms == delay_ms
    assert info.custom_status.startswith("attempt 1 failed: RuntimeError: try later; retry in")


def test_the_never_policy_fails_a_job_for_good_on_its_first_failure(
    pl: PinLaterClient, queue: str
) -> None:
    calls = Counter[str]()

    def fails(job: JobContext) -> None:
        calls[job.descriptor] += 1
        raise KeyError("no such user")

    d = pl.enqueue_one(queue, b"x", attempts_allowed=5)
    worker = make_worker(pl, queue, fails, retry=never)
    with working(worker):
        info = wait_for(lambda: settled(pl, [d]), 30)[d]
        time.sleep(0.5)  # a retry, were there one, would be due at once
    assert (info.state, info.attempts_remaining) == (JobState.FAILED, 0)
    assert info.custom_status == (
        "attempt 1 failed: KeyError: 'no such user'; not retried (retry policy: never)\n"
    )
    assert calls[d] == 1 and worker.failed == 1


# -- long jobs ---------------------------------------------------------------------------


def test_heartbeats_keep_a_job_longer_than_the_claim_timeout_and_without_them_it_times_out(
    pl: PinLaterClient, server: ServerProcess
) -> None:
    """The same 7 s job (over twice the 3 s claim timeout, one attempt allowed) on two
    queues: with heartbeats it succeeds on its first and only run; without them its claim
    times out, the job FAILS and the late success ack changes nothing."""
    runs = Counter[str]()

    def slow(job: JobContext) -> str:
        runs[job.descriptor] += 1
        time.sleep(7)
        return "finished"

    beating, silent = new_queue(pl, "hb"), new_queue(pl, "nohb")
    kept = pl.enqueue_one(beating, b"x", attempts_allowed=1)
    lost = pl.enqueue_one(silent, b"x", attempts_allowed=1)
    with (
        working(make_worker(pl, beating, slow)) as with_heartbeats,
        working(make_worker(pl, silent, slow, heartbeat_s=0)) as without,
    ):
        wait_for(lambda: with_heartbeats.processed == 1 and without.processed == 1, 60)
    jobs = wait_for(lambda: settled(pl, [kept, lost]), 30)

    assert (jobs[kept].state, jobs[kept].custom_status) == (JobState.SUCCEEDED, "finished")
    assert (jobs[lost].state, jobs[lost].custom_status) == (JobState.FAILED, "")
    assert runs == {kept: 1, lost: 1}


def test_one_heartbeat_call_renews_every_claim_the_worker_holds(
    server: ServerProcess, pl: PinLaterClient, queue: str
) -> None:
    descriptors = pl.enqueue(queue, [Job(b"x", attempts_allowed=1) for _ in range(3)])
    all_visible(pl, queue, 3)  # so that one dequeue gets all three
    started = Counter[str]()

    def slow(job: JobContext) -> None:
        started[job.descriptor] += 1
        time.sleep(4)

    spy = SpyClient(f"127.0.0.1:{server.port}", source=f"spy:{uuid.uuid4()}")
    try:
        worker = make_worker(spy, queue, slow, concurrency=3, heartbeat_s=0.5)
        with working(worker):
            jobs = wait_for(lambda: settled(pl, descriptors), 60)
    finally:
        spy.close()

    assert all(j.state is JobState.SUCCEEDED for j in jobs.values())
    assert started == dict.fromkeys(descriptors, 1)
    # Heartbeats are bare checkpoints; while all three ran, one call carried all three.
    beats = [c for call in spy.checkpoints for c in call]
    assert all(c == Checkpoint(c.descriptor) for c in beats)
    assert any({c.descriptor for c in call} == set(descriptors) for call in spy.checkpoints)


# -- acks --------------------------------------------------------------------------------


class SpyClient(PinLaterClient):
    """Records the acks each call carried."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, list[str]]] = []
        self.checkpoints: list[list[Checkpoint]] = []

    def dequeue(
        self,
        queue: str,
        limit: int,
        *,
        succeeded: Iterable[Ack | str] = (),
        failed: Iterable[Ack | str] = (),
        dry_run: bool = False,
    ) -> list[DequeuedJob]:
        succeeded, failed = list(succeeded), list(failed)
        jobs = super().dequeue(queue, limit, succeeded=succeeded, failed=failed, dry_run=dry_run)
        self.calls.append(("dequeue", _names(succeeded, failed)))
        return jobs

    def ack(
        self, queue: str, succeeded: Iterable[Ack | str] = (), failed: Iterable[Ack | str] = ()
    ) -> None:
        succeeded, failed = list(succeeded), list(failed)
        super().ack(queue, succeeded, failed)
        self.calls.append(("ack", _names(succeeded, failed)))

    def checkpoint(self, queue: str, checkpoints: Iterable[Checkpoint]) -> None:
        checkpoints = list(checkpoints)
        super().checkpoint(queue, checkpoints)
        self.checkpoints.append(checkpoints)


def _names(*acks: list[Ack | str]) -> list[str]:
    return [a if isinstance(a, str) else a.descriptor for group in acks for a in group]


def test_acks_ride_on_the_next_dequeue_and_each_job_is_acked_once(
    server: ServerProcess, queue: str, pl: PinLaterClient
) -> None:
    descriptors = pl.enqueue(queue, [Job(f"{i}".encode()) for i in range(30)])
    spy = SpyClient(f"127.0.0.1:{server.port}", source=f"spy:{uuid.uuid4()}")
    try:
        worker = make_worker(spy, queue, lambda job: None, concurrency=3, batch_size=5)
        with working(worker):
            wait_for(lambda: settled(pl, descriptors), 60)
    finally:
        spy.close()
    acked = [d for _, ds in spy.calls for d in ds]
    piggybacked = [d for kind, ds in spy.calls if kind == "dequeue" for d in ds]

    assert Counter(acked) == Counter(descriptors)  # every job acked, none twice
    assert piggybacked, "no ack rode on a dequeue"
    assert all(i.state is JobState.SUCCEEDED for i in pl.lookup(descriptors).values())
    assert worker.succeeded == worker.processed == 30


def test_acks_made_while_the_server_is_down_reach_it_when_it_is_back(
    kafka: KafkaLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A job finishes while its server is down: the worker keeps the ack, keeps trying,
    and the job is SUCCEEDED once the server is back (its one run, no retry)."""
    tag = uuid.uuid4().hex[:10]
    server = ServerProcess(prefix=f"wdn{tag}.", schema=f"wdn_{tag}", settings=server_settings())
    release = threading.Event()
    started = threading.Event()
    runs = Counter[str]()

    def waits(job: JobContext) -> str:
        runs[job.descriptor] += 1
        started.set()
        release.wait(60)
        return "made it"

    caplog.set_level(logging.WARNING, logger="pinledger.worker")
    try:
        with running([server], tmp_path), PinLaterClient(f"127.0.0.1:{server.port}") as pl:
            name = new_queue(pl)
            d = pl.enqueue_one(name, b"x")
            worker = Worker(pl, name, waits, idle_backoff=(0.05, 0.3), heartbeat_s=0)
            with working(worker):
                assert started.wait(30)
                server.stop()
                release.set()
                wait_for(lambda: worker.processed == 1, 30)
                wait_for(lambda: "acks kept to send again" in caplog.text, 30)
                server.start(tmp_path)
                info = wait_for(
                    lambda: (i := pl.lookup([d])[d]).state is JobState.SUCCEEDED and i, 60
                )
        assert info.custom_status == "made it"
        assert runs == {d: 1}
    finally:
        for topic in kafka.topics():
            if topic.startswith(server.prefix):
                kafka.delete_topic(topic)
        Store(stack_settings().pg_dsn, server.schema).drop()


# -- crashing handlers -------------------------------------------------------------------


class Doom(BaseException):
    """Not an Exception: what a careless library might raise."""


def test_a_crashing_handler_never_kills_the_worker(pl: PinLaterClient, queue: str) -> None:
    def moody(job: JobContext) -> str:
        match job.body:
            case b"value":
                raise ValueError("x" * 10_000)
            case b"doom":
                raise Doom("the end")
            case b"generator":
                raise GeneratorExit
            case b"recursion":
                return moody(job)
            case _:
                return "fine"

    bad = pl.enqueue(queue, [Job(b, attempts_allowed=1) for b in (b"value", b"doom", b"generator")])
    bad += pl.enqueue(queue, [Job(b"recursion", attempts_allowed=1)])
    good = pl.enqueue(queue, [Job(b"ok", priority=2) for _ in range(6)])
    worker = make_worker(pl, queue, moody, concurrency=2, batch_size=2)
    with working(worker):
        jobs = wait_for(lambda: settled(pl, bad + good), 60)

    assert all(jobs[d].state is JobState.SUCCEEDED for d in good)
    statuses = [jobs[d].custom_status for d in bad]
    assert all(jobs[d].state is JobState.FAILED for d in bad)
    assert statuses[0].startswith("attempt 1 failed: ValueError: xxx")
    assert statuses[0].endswith("...; no attempts left\n")
    assert len(statuses[0]) < 600  # a huge message is cut, leaving room for other attempts
    assert statuses[1] == "attempt 1 failed: Doom: the end; no attempts left\n"
    assert statuses[2] == "attempt 1 failed: GeneratorExit; no attempts left\n"
    assert statuses[3].startswith("attempt 1 failed: RecursionError: maximum recursion")
    assert (worker.processed, worker.failed, worker.succeeded) == (10, 4, 6)


# -- chained and cron-like jobs ----------------------------------------------------------


def test_a_chained_job_carries_its_state_from_step_to_step(pl: PinLaterClient, queue: str) -> None:
    seen: list[tuple[bytes, int]] = []

    def step(job: JobContext) -> str | None:
        seen.append((job.body, job.attempts_remaining))
        n = int(job.body.decode().removeprefix("step:"))
        if n < 3:
            job.reschedule(new_body=f"step:{n + 1}", status=f"step {n} done\n")
            return None
        return "chain complete"

    d = pl.enqueue_one(queue, b"step:0", attempts_allowed=2)
    worker = make_worker(pl, queue, step)
    with working(worker):
        info = wait_for(lambda: settled(pl, [d]), 30)[d]
    info = pl.lookup([d], include_body=True)[d]

    assert seen == [(b"step:0", 2), (b"step:1", 2), (b"step:2", 2), (b"step:3", 2)]
    assert (info.state, info.body, info.attempts_remaining) == (JobState.SUCCEEDED, b"step:3", 2)
    assert info.custom_status == "step 2 done\nstep 1 done\nstep 0 done\nchain complete"
    assert (worker.counters.rescheduled, worker.succeeded) == (3, 1)


def test_a_checkpointed_body_is_what_the_next_attempt_resumes_from(
    pl: PinLaterClient, queue: str
) -> None:
    seen: list[bytes] = []

    def resumable(job: JobContext) -> str:
        seen.append(job.body)
        if job.attempt == 1:
            job.checkpoint(new_body="page:40", status="saved page 40\n")
            assert job.body == b"page:40"
            raise TimeoutError
        return "resumed"

    d = pl.enqueue_one(queue, b"page:0", attempts_allowed=2)
    with working(make_worker(pl, queue, resumable)):
        info = wait_for(lambda: settled(pl, [d]), 30)[d]

    assert seen == [b"page:0", b"page:40"]
    assert (info.state, info.custom_status) == (
        JobState.SUCCEEDED,
        "saved page 40\nattempt 1 failed: TimeoutError; retry in 0 s\nresumed",
    )


def test_a_cron_like_job_runs_again_at_its_next_time_with_a_fresh_budget(
    pl: PinLaterClient, queue: str
) -> None:
    runs: list[tuple[float, int]] = []

    def every_second(job: JobContext) -> None:
        runs.append((time.time(), job.attempts_remaining))
        if len(runs) == 2:
            raise OSError("flaky network")  # a failed run is retried, then the cron goes on
        if len(runs) < 5:
            job.reschedule(after_ms(1.0), attempts_allowed=job.attempts_allowed)

    d = pl.enqueue_one(queue, b"tick", attempts_allowed=2)
    with working(make_worker(pl, queue, every_second)):
        info = wait_for(lambda: settled(pl, [d]), 60)[d]

    assert info.state is JobState.SUCCEEDED
    # run 2 failed (retried at once, one attempt used); run 3 restored the budget
    assert [remaining for _, remaining in runs] == [2, 2, 1, 2, 2]
    gaps = [b - a for (a, _), (b, _) in pairwise(runs)]
    assert all(gap >= 0.9 for i, gap in enumerate(gaps) if i != 1)


# -- graceful shutdown -------------------------------------------------------------------


def test_stop_releases_running_jobs_without_using_an_attempt(
    pl: PinLaterClient, queue: str
) -> None:
    gate = threading.Event()
    started = Counter[str]()

    def blocks(job: JobContext) -> None:
        started[job.descriptor] += 1
        gate.wait(60)

    descriptors = pl.enqueue(queue, [Job(b"x", attempts_allowed=3) for _ in range(5)])
    worker = make_worker(pl, queue, blocks, concurrency=2, batch_size=5, grace_s=0.5)
    thread = worker.start()
    try:
        wait_for(lambda: len(started) == 2, 30)
        # Both threads are busy, so the worker dequeues no more: what it holds is fixed.
        held = sum(j.state is JobState.IN_PROGRESS for j in pl.lookup(descriptors).values())
        worker.stop()
        thread.join(60)
        assert not thread.is_alive()
    finally:
        gate.set()

    jobs = pl.lookup(descriptors)
    assert {(j.state, j.attempts_remaining, j.claim) for j in jobs.values()} == {
        (JobState.PENDING, 3, None)
    }
    assert (worker.counters.released, worker.processed) == (held, 0)
    assert held >= 2


def test_sigterm_loses_no_ack_and_releases_what_did_not_finish(
    server: ServerProcess, pl: PinLaterClient, queue: str, tmp_path: Path
) -> None:
    """Worker 1 (4 threads, batches of 6, grace 5 s) gets SIGTERM while two 1.5 s jobs
    and two 1 h jobs run. Asserted: it exits 0; every job whose handler returned in it
    (the short and the 1.5 s ones) is SUCCEEDED when it has exited, with no other worker
    running; every other job is PENDING with its full attempt budget and no claim;
    worker 2 then completes those, and no job's handler completed in both workers."""
    journal = tmp_path / "journal"
    short = pl.enqueue(queue, [Job(b"sleep:0.2", priority=1) for _ in range(4)])
    medium = pl.enqueue(queue, [Job(b"sleep:1.5", priority=2) for _ in range(2)])
    long = pl.enqueue(queue, [Job(b"sleep:3600", priority=2) for _ in range(2)])
    later = pl.enqueue(queue, [Job(b"sleep:3600", priority=3) for _ in range(4)])
    everything = short + medium + long + later
    # Once the server owns every partition of the new queue, dequeues follow priority.
    all_visible(pl, queue, len(everything))

    def lines() -> list[tuple[str, str, str]]:
        found = []
        for line in journal.read_text().splitlines() if journal.exists() else []:
            what, descriptor, tag = line.split()
            found.append((what, descriptor, tag))
        return found

    first = start_worker(server, queue, journal, "w1", tmp_path)
    try:
        wait_for(
            lambda: (
                {d for what, d, _ in lines() if what == "done"} >= set(short)
                and {d for what, d, _ in lines() if what == "start"} >= set(medium + long)
            ),
            60,
        )
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0, (tmp_path / "w1.log").read_text()[-3000:]
    counters = json.loads(out.strip().splitlines()[-1])

    done_by_first = {d for what, d, tag in lines() if what == "done" and tag == "w1"}
    assert done_by_first == set(short + medium)
    jobs = pl.lookup(everything)
    for d in done_by_first:
        assert (jobs[d].state, jobs[d].custom_status) == (JobState.SUCCEEDED, "done by w1")
    for d in set(everything) - done_by_first:
        assert (jobs[d].state, jobs[d].attempts_remaining, jobs[d].claim) == (
            JobState.PENDING,
            jobs[d].attempts_allowed,
            None,
        )
    assert counters["succeeded"] == counters["processed"] == 6
    assert 2 <= counters["released"] <= 6  # the two long ones, and any waiting for a thread

    second = start_worker(server, queue, journal, "w2", tmp_path, "--max-sleep", "0")
    try:
        wait_for(lambda: settled(pl, everything), 60)
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=60)
    finally:
        second.kill()
    assert second.returncode == 0

    done = [(d, tag) for what, d, tag in lines() if what == "done"]
    assert Counter(d for d, _ in done) == Counter(everything)  # each completed exactly once
    assert {d for d, tag in done if tag == "w2"} == set(everything) - done_by_first
    assert all(i.state is JobState.SUCCEEDED for i in pl.lookup(everything).values())


def start_worker(
    server: ServerProcess, queue: str, journal: Path, tag: str, log_dir: Path, *extra: str
) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "tests.integration.worker_process",
        "--port",
        str(server.port),
        "--queue",
        queue,
        "--journal",
        str(journal),
        "--tag",
        tag,
        "--claim-timeout",
        str(CLAIM_TIMEOUT_S),
        *extra,
    ]
    with (log_dir / f"{tag}.log").open("w") as log:
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)


# -- the example -------------------------------------------------------------------------


def test_the_example_thumbnail_jobs_succeed_retry_or_fail_as_documented(
    pl: PinLaterClient, queue: str
) -> None:
    descriptors = pl.enqueue(queue, thumbnail_jobs(25, delayed_s=0.5))
    worker = make_worker(pl, queue, make_thumbnail, retry=constant(0.1))
    with working(worker):
        jobs = wait_for(lambda: settled(pl, descriptors), 60)

    corrupt = descriptors[24]
    assert (jobs[corrupt].state, jobs[corrupt].attempts_remaining) == (JobState.FAILED, 0)
    assert jobs[corrupt].custom_status.count("CorruptImageError") == 3
    others = [jobs[d] for d in descriptors[:24]]
    assert all(j.state is JobState.SUCCEEDED for j in others)
    flaky = [j for j in others if "ImageStoreTimeoutError" in j.custom_status]
    assert all(j.attempts_remaining == 2 for j in flaky)
    assert all(j.custom_status.endswith(".jpg") for j in others)
    assert (worker.succeeded, worker.retried, worker.failed) == (24, len(flaky) + 2, 1)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return int(refused.code), refused.read().decode()


@contextmanager
def worker_command(
    server: ServerProcess, queue: str, log_path: Path, *options: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`pinledger worker` on the example's handler, with its status on a free port: the
    process and the status port's URL, once it serves; killed if still running after."""
    command = [
        *("worker", "pinledger.client.examples.thumbnail_worker:make_thumbnail"),
        *("--queue", queue, "--servers", f"127.0.0.1:{server.port}", *options),
        *("--retry-s", "0.1", "--claim-timeout-s", str(CLAIM_TIMEOUT_S), "--status-port", "0"),
    ]
    with log_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pinledger", *command],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        serving = wait_for(
            lambda: re.search(r"/metrics on http://127\.0\.0\.1:(\d+)", log_path.read_text()),
            30,
        )
        yield process, f"http://127.0.0.1:{serving.group(1)}"
    finally:
        process.kill()
        process.wait()


def test_the_worker_command_works_the_queue_shows_its_status_and_stops_on_sigterm(
    server: ServerProcess, pl: PinLaterClient, queue: str, tmp_path: Path
) -> None:
    """`pinledger worker MODULE:HANDLER`: the example's jobs end as with a Worker of
    one's own, /metrics counts them, /health says ok, and SIGTERM ends it with exit 0."""
    descriptors = pl.enqueue(queue, thumbnail_jobs(25, delayed_s=0.5))
    log_path = tmp_path / "worker.log"
    with worker_command(server, queue, log_path, "--concurrency", "4") as (process, status):
        jobs = wait_for(lambda: settled(pl, descriptors), 60)
        assert [jobs[d].state for d in descriptors].count(JobState.SUCCEEDED) == 24
        flaky = [d for d in descriptors[:24] if "ImageStoreTimeoutError" in jobs[d].custom_status]
        code, body = _get(f"{status}/health")
        assert code == 200
        health = json.loads(body)
        # Every run: 24 that worked, the flaky ones' first attempts, the corrupt one's 3.
        runs = 24 + len(flaky) + 3
        assert (health["status"], health["server"], health["processed"]) == (
            "ok",
            "answering",
            runs,
        )
        _, metrics = _get(f"{status}/metrics")
        label = f'pinledger_worker_jobs_total{{queue="{queue}",outcome='
        assert f'{label}"succeeded"}} 24' in metrics
        assert f'{label}"failed"}} 1' in metrics
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log_path.read_text()[-3000:]
    assert f"stopped: {runs} processed (24 succeeded" in log_path.read_text()


def test_worker_processes_share_the_queue_restart_when_killed_and_stop_together(
    server: ServerProcess, pl: PinLaterClient, queue: str, tmp_path: Path
) -> None:
    """`pinledger worker --processes 2`: the jobs end as with one worker, /metrics
    shows both processes, a killed process starts again, SIGTERM stops them all."""
    descriptors = pl.enqueue(queue, thumbnail_jobs(25, delayed_s=0.5))
    log_path = tmp_path / "workers.log"
    with worker_command(server, queue, log_path, "--processes", "2") as (process, status):
        jobs = wait_for(lambda: settled(pl, descriptors), 60)
        assert [jobs[d].state for d in descriptors].count(JobState.SUCCEEDED) == 24
        _, metrics = _get(f"{status}/metrics")
        jobs_total = f'pinledger_worker_jobs_total{{process="(\\d)",queue="{queue}",'
        succeeded = re.findall(jobs_total + r'outcome="succeeded"} (\d+)', metrics)
        assert sorted(p for p, _ in succeeded) == ["0", "1"]
        assert sum(int(n) for _, n in succeeded) == 24

        def healthy() -> str | None:
            code, body = _get(f"{status}/health")
            return body if code == 200 else None

        body = wait_for(healthy, 30)
        first = json.loads(body)["processes"]["0"]
        assert first["health"]["status"] == "ok" and first["restarts"] == 0
        os.kill(first["pid"], signal.SIGKILL)

        def restarted() -> dict[str, Any] | None:
            code, body = _get(f"{status}/health")
            again = json.loads(body)["processes"]["0"]
            return again if code == 200 and again["restarts"] == 1 else None

        again = wait_for(restarted, 30)
        assert again["pid"] != first["pid"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log_path.read_text()[-3000:]
    log = log_path.read_text()
    assert "worker process 0 (pid" in log and "exited with -9" in log
    assert "every worker process stopped" in log
    for pid in (first["pid"], again["pid"]):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- tracing -----------------------------------------------------------------------------


def test_handler_spans_nest_inside_the_job_span_which_records_a_failure(
    server: ServerProcess, pl: PinLaterClient, queue: str, tmp_path: Path
) -> None:
    ok, failing = pl.enqueue(queue, [Job(b"sleep:0"), Job(b"fail", attempts_allowed=1)])
    spans_file = tmp_path / "spans.json"
    command = ["--spans", str(spans_file), "--exit-after", "2"]
    worker = start_worker(server, queue, tmp_path / "journal", "traced", tmp_path, *command)
    try:
        worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, (tmp_path / "traced.log").read_text()[-3000:]
    spans = json.loads(spans_file.read_text())

    jobs = {s["attributes"]["messaging.message.id"]: s for s in spans if s["kind"] == "CONSUMER"}
    assert set(jobs) == {ok, failing}
    for descriptor, job_span in jobs.items():
        assert job_span["name"] == f"process {queue}"
        assert job_span["attributes"]["pinledger.attempt"] == 1
        (user,) = [s for s in spans if s["parent_id"] == job_span["span_id"]]
        assert (user["name"], user["trace_id"]) == ("user work", job_span["trace_id"])
        if descriptor == ok:
            assert (job_span["status"], job_span["events"]) == ("UNSET", [])
    failed = jobs[failing]
    assert failed["status"] == "ERROR"
    [event] = [e for e in failed["events"] if e["name"] == "exception"]
    assert event["attributes"]["exception.type"] == "RuntimeError"
    assert event["attributes"]["exception.message"] == "asked to fail"


# -- settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"batch_size": 0}, "batch_size must be between 1 and 1000"),
        ({"claim_timeout_s": 0}, "claim_timeout_s must be positive"),
        ({"idle_backoff": (2.0, 1.0)}, "idle_backoff must be"),
        ({"grace_s": -1}, "cannot be negative"),
        ({"claim_timeout_s": 10, "heartbeat_s": 10}, "must be shorter than claim_timeout_s"),
    ],
)
def test_settings_a_worker_cannot_use_are_refused_with_the_setting_named(
    options: dict[str, Any], message: str
) -> None:
    with PinLaterClient("127.0.0.1:1") as pl, pytest.raises(ValueError, match=message):
        Worker(pl, "q", lambda job: None, **options)
