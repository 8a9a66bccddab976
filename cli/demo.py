"""`pinledger demo`: a tour of pinledger as a user meets it, in about half a minute.

It starts a `pinledger serve` of its own (on free ports, against the configured Kafka,
Postgres schema and topic prefix), creates a fresh queue, enqueues thumbnail jobs with
two priorities, some of them delayed, and runs the example worker
(pinledger.client.examples.thumbnail_worker) with an exponential retry policy: some
jobs fail once and are retried, one can never succeed and ends FAILED. It prints progress every
second, then the jobs by state and priority, the full history of a retried job (what
`pinledger trace` prints), replays the queue's log into a scratch schema to show it
rebuilds the same tables, stops the server and says what to try next.

The queue is kept, so that the commands it suggests have something to look at.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pinledger.cli.trace import fetch_history, render
from pinledger.client import JobState, PinLaterClient, Worker, exponential, worker_source
from pinledger.client.errors import ClientError
from pinledger.client.examples.enqueue_jobs import thumbnail_jobs
from pinledger.client.examples.thumbnail_worker import make_thumbnail
from pinledger.client.jobs import Job
from pinledger.client.worker import Handler
from pinledger.ledger import descriptor
from pinledger.ledger.log import LogError
from pinledger.projections.factory import open_store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.projections.store import StoreError
from pinledger.service.assembly import open_log
from pinledger.service.config import Config

JOBS = 40
DELAY_S = 3.0
# How long the worker may take before the demo gives up (it needs a few seconds).
WORK_LIMIT_S = 60.0
SERVER_START_LIMIT_S = 60.0
PRIORITIES = (1, 2)
STACK_HINT = "is the stack up? `make stack-up` starts it, `make stack-status` shows it"


class DemoError(Exception):
    """A step failed; `hint` says what the user can do about it."""

    def __init__(self, message: str, hint: str = STACK_HINT) -> None:
        super().__init__(message)
        self.hint = hint


def say(text: str = "") -> None:
    print(text, flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class DemoServer:
    """A `pinledger serve` subprocess on free ports, logging to a file."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.port = _free_port()
        self.admin_port = _free_port()
        log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (the server writes it; kept on failure)
            prefix="pinledger-demo-server-", suffix=".log", delete=False
        )
        log.close()
        self.log_path = Path(log.name)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        env = dict(os.environ)
        env.update(
            PINLEDGER_PORT=str(self.port),
            PINLEDGER_ADMIN_PORT=str(self.admin_port),
            PINLEDGER_SERVER_ID=f"demo-{socket.gethostname()}-{self.port}",
        )
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pinledger", "serve"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + SERVER_START_LIMIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DemoError(
                    f"the server exited during startup (exit {self.proc.returncode}):\n"
                    + self.log_tail()
                )
            if self._healthy():
                return
            time.sleep(0.2)
        raise DemoError(
            f"the server was not healthy after {SERVER_START_LIMIT_S:.0f} s:\n" + self.log_tail()
        )

    def _healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.admin_port}/health"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "    (no server log)"
        return "\n".join("    " + line for line in text.splitlines()[-lines:])

    def stop(self) -> bool:
        """SIGTERM, then SIGKILL after 20 s; True when it stopped by itself."""
        if self.proc is None or self.proc.poll() is not None:
            return True
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
            return True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return False


class _WorkerLines(logging.Handler):
    """The worker's retry and failure messages as demo progress lines (no tracebacks)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            say(f"     {record.getMessage()}")


@contextmanager
def _worker_lines() -> Iterator[None]:
    logger = logging.getLogger("pinledger.worker")
    handler = _WorkerLines()
    saved = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved


def _counts(client: PinLaterClient, queue: str) -> dict[tuple[JobState, int], int]:
    """Jobs by (state, priority), runnable now and later together."""
    return {
        (state, priority): sum(
            client.count(queue, state, priority=priority, count_future=future)
            for future in (False, True)
        )
        for state in JobState
        for priority in PRIORITIES
    }


def _by_state(counts: dict[tuple[JobState, int], int]) -> dict[JobState, int]:
    return {s: sum(n for (state, _), n in counts.items() if state is s) for s in JobState}


def _describe_jobs(jobs: list[Job]) -> str:
    urgent = sum(job.priority == 1 for job in jobs)
    delayed = sum(job.run_after_ms is not None for job in jobs)
    broken = sum(b"corrupt" in job.body for job in jobs)
    return (
        f"{urgent} at priority 1 (the highest), {len(jobs) - urgent} at priority 2, "
        f"{delayed} delayed by {DELAY_S:g} s, {broken} naming a corrupt image"
    )


def _work(
    client: PinLaterClient, config: Config, queue: str, total: int, handler: Handler
) -> Worker:
    worker = Worker(
        client,
        queue,
        handler,
        concurrency=4,
        batch_size=10,
        # 0.2 s, then 0.4 s: quick enough for a demo; a real worker waits longer.
        retry=exponential(0.2, cap_s=2, jitter=0.2),
        claim_timeout_s=config.claim_timeout_s,
        idle_backoff=(0.05, 0.5),
        grace_s=5,
        name="demo-worker",
    )
    thread = worker.start()
    started = time.monotonic()
    try:
        while True:
            time.sleep(1.0)
            states = _by_state(_counts(client, queue))
            done = states[JobState.SUCCEEDED] + states[JobState.FAILED]
            say(
                f"   [{time.monotonic() - started:4.1f}s] {worker.processed} runs "
                f"({worker.succeeded} ok, {worker.retried} to retry, {worker.failed} failed "
                f"for good) | " + ", ".join(f"{s.name} {n}" for s, n in states.items())
            )
            if done >= total:
                return worker
            if time.monotonic() - started > WORK_LIMIT_S:
                raise DemoError(
                    f"only {done} of {total} jobs finished within {WORK_LIMIT_S:.0f} s",
                    "the machine may be very busy; see the server log, and try again",
                )
    finally:
        worker.stop()
        thread.join(timeout=30)


def _interesting_job(client: PinLaterClient, descriptors: list[str]) -> tuple[str, str]:
    """A job worth tracing, and why: one that failed, was retried and succeeded, or
    else one that failed for good."""
    infos = client.lookup(descriptors)
    for d in descriptors:
        info = infos.get(d)
        if (
            info
            and info.state is JobState.SUCCEEDED
            and info.attempts_remaining < (info.attempts_allowed)
        ):
            return d, "it failed once, waited for its retry delay, then succeeded"
    for d in descriptors:
        info = infos.get(d)
        if info and info.state is JobState.FAILED:
            return d, "it failed on every attempt and ended FAILED"
    return descriptors[0], "the first job enqueued"


def _replay_queue(config: Config, queue: str) -> str:
    live = open_store(config.store_url, config.schema)
    scratch = open_store(config.store_url, f"demo_replay_{uuid.uuid4().hex[:8]}")
    kafka = open_log(config, client_id="pinledger-demo")
    try:
        report = replay(live, scratch, kafka, config.topic_prefix, Scope(frozenset({queue})))
    finally:
        kafka.close()
        scratch.drop()
        live.close()
    if not report.identical:
        raise DemoError(
            f"the replay of queue {queue} differs from the live tables: {report.diffs}",
            "this is a bug: please report it with the output of "
            f"`pinledger replay --queue {queue}`",
        )
    return (
        f"{report.events} events replayed in {report.seconds:.2f} s: identical to the live tables"
    )


def _next_steps(queue: str, job: str, config: Config) -> None:
    say("What to try next (start a server first: `pinledger serve`, port 9010):")
    env = ""
    if config.topic_prefix != "pinledger." or config.schema != "pinledger":
        env = (
            f"   (with PINLEDGER_TOPIC_PREFIX={config.topic_prefix} "
            f"PINLEDGER_SCHEMA={config.schema}, as this demo ran)\n"
        )
    if env:
        say(env.rstrip("\n"))
    for command, what in (
        (f"pinledger client --mode get_job_count --queue {queue} --job_state 3", "FAILED jobs"),
        (f"pinledger client --mode scan --queue {queue} --job_state FAILED", "list them"),
        (
            f"pinledger client --mode retry_failed --queue {queue} --priority 2",
            "give them another go",
        ),
        (f"pinledger client --mode lookup --job_descriptor {job}", "one job, as PinLater shows it"),
        (f"pinledger trace {job}", "its whole history"),
        (
            f"pinledger client --mode enqueue --queue {queue} --num_queries 2000 "
            "--batch_size 10 --concurrency 4",
            "load: 20,000 jobs",
        ),
        (
            f"pinledger client --mode dequeue --queue {queue} --num_queries -1 "
            "--batch_size 10 --concurrency 4 --dequeue_success_percent 90",
            "work them off (Ctrl-C stops)",
        ),
        (
            f"python -m pinledger.client.examples.thumbnail_worker --queue {queue}",
            "the example worker",
        ),
        ("pinledger replay", "rebuild every queue from Kafka and compare"),
    ):
        say(f"   {command}\n       # {what}")


class Tour:
    """The demo's steps, in order; `step` names the one running, for error messages."""

    def __init__(self, config: Config, server: DemoServer, queue: str) -> None:
        self.config = config
        self.server = server
        self.queue = queue
        self.step = "starting the server"
        self.started = time.monotonic()

    def start_server(self) -> None:
        config = self.config
        say(
            f"1. start `pinledger serve` on {self.server.address} (Kafka {config.kafka}, "
            f"Postgres schema {config.schema}, topic prefix {config.topic_prefix!r})"
        )
        self.server.start()
        say(
            f"   healthy after {time.monotonic() - self.started:.1f} s; "
            f"log in {self.server.log_path}"
        )

    def enqueue(self, client: PinLaterClient, jobs: list[Job]) -> list[str]:
        self.step = "creating the queue and enqueuing"
        say(f"2. create queue {self.queue!r} and enqueue {len(jobs)} thumbnail jobs")
        client.create_queue(self.queue)
        descriptors = client.enqueue(self.queue, jobs)
        say(f"   {_describe_jobs(jobs)}; e.g. {descriptors[0]}")
        runnable = client.count(self.queue, JobState.PENDING)
        later = client.count(self.queue, JobState.PENDING, count_future=True)
        say(f"   PENDING: {runnable} runnable now, {later} later")
        return descriptors

    def work(self, client: PinLaterClient, handler: Handler, total: int) -> None:
        self.step = "running the worker"
        say(
            "3. run the example worker (pinledger.client.examples.thumbnail_worker): 4 threads, "
            "retries after 0.2 s, 0.4 s; 3 attempts per job"
        )
        with _worker_lines():
            worker = _work(client, self.config, self.queue, total, handler)
        say(
            f"   all {total} jobs finished: {worker.processed} runs, "
            f"{worker.retried} failures retried, {worker.failed} failed for good"
        )

    def count(self, client: PinLaterClient) -> None:
        self.step = "counting jobs"
        say("4. jobs by state and priority (getJobCount):")
        counts = _counts(client, self.queue)
        say(f"     {'state':<12} {'p1':>4} {'p2':>4} {'total':>6}")
        for state in JobState:
            row = [counts[(state, p)] for p in PRIORITIES]
            say(f"     {state.name:<12} {row[0]:>4} {row[1]:>4} {sum(row):>6}")

    def trace(self, client: PinLaterClient, descriptors: list[str]) -> str:
        self.step = "reading a job's history"
        job, why = _interesting_job(client, descriptors)
        say(f"5. the history of {job} ({why}), as `pinledger trace` shows it:")
        history = fetch_history(client, descriptor.parse(job))
        for line in render(history).splitlines():
            say(f"     {line}")
        return job

    def replay(self) -> None:
        self.step = "replaying the queue's log"
        say(f"6. rebuild queue {self.queue} from its Kafka log into a scratch schema, compare")
        say(f"   {_replay_queue(self.config, self.queue)}")

    def stop_server(self) -> None:
        self.step = "stopping the server"
        clean = self.server.stop()
        say(f"7. stopped the server{'' if clean else ' (it had to be killed)'}")


def run_demo(config: Config) -> int:
    queue = f"demo_{uuid.uuid4().hex[:8]}"
    server = DemoServer(config)
    tour = Tour(config, server, queue)
    try:
        tour.start_server()
        with PinLaterClient(server.address, source=worker_source("demo")) as client:
            descriptors = tour.enqueue(client, thumbnail_jobs(JOBS, delayed_s=DELAY_S))
            tour.work(client, make_thumbnail, len(descriptors))
            tour.count(client)
            job = tour.trace(client, descriptors)
        tour.replay()
        tour.stop_server()
    except (DemoError, ClientError, LogError, StoreError, OSError, ValueError) as exc:
        server.stop()
        say()
        say(f"demo FAILED while {tour.step}: {exc}")
        say(f"   {exc.hint if isinstance(exc, DemoError) else STACK_HINT}")
        say(f"   server log: {server.log_path}")
        return 1
    except KeyboardInterrupt:
        server.stop()
        say("\ndemo interrupted; the server it started is stopped")
        return 130
    finally:
        server.stop()
    say()
    say(f"Demo done in {time.monotonic() - tour.started:.1f} s. Queue {queue} is kept.")
    _next_steps(queue, job, config)
    server.log_path.unlink(missing_ok=True)
    return 0
