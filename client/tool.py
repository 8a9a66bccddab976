"""`pinledger client`: PinLater's client tool, for checking a server by hand and for
load tests. Same flags as PinLaterClientTool:

    pinledger client --mode create --queue emails
    pinledger client --mode enqueue --queue emails --num_queries 1000 --batch_size 10 \
        --concurrency 4
    pinledger client --mode dequeue --queue emails --num_queries -1 \
        --dequeue_success_percent 90
    pinledger client --mode get_job_count --queue emails --job_state 0

The mode may also come first without `--mode` (`pinledger client lookup ...`).

Load modes (enqueue, dequeue, check_dequeue) issue `--num_queries` calls (-1: until
Ctrl-C) from `--concurrency` threads, `--batch_size` jobs per call, print calls/s,
jobs/s and latency percentiles every second and a summary at the end. dequeue acks
each job it receives (success with probability `--dequeue_success_percent`) on its
thread's next dequeue, as a worker would; acks still pending at the end are sent in
one last ack call. check_dequeue is a dryRun dequeue: it shows runnable jobs without
claiming them.

Exit status: 0 when every call succeeded, 1 when the server refused a call or could
not be reached (the message names PinLater's ErrorCode), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import getpass
import math
import os
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from client.client import PinLaterClient
from client.errors import ClientError, ErrorCode, PinLaterError, ServerUnavailableError
from client.jobs import Ack, Job, JobInfo, JobState, after_ms

MODES = (
    "create",
    "enqueue",
    "dequeue",
    "check_dequeue",
    "lookup",
    "get_job_count",
    "get_queue_names",
    "scan",
    "retry_failed",
    "delete_jobs",
    "delete_queue",
)
LOAD_MODES = frozenset({"enqueue", "dequeue", "check_dequeue"})
# How many descriptors a load run lists at the end.
SHOWN = 20

# Errors that no amount of repeating will fix: a load run stops at the first one.
FATAL_CODES = frozenset(
    {
        ErrorCode.QUEUE_NOT_FOUND,
        ErrorCode.QUEUE_NAME_INVALID,
        ErrorCode.QUEUE_NAME_TOO_LONG,
        ErrorCode.PRIORITY_NOT_SUPPORTED,
        ErrorCode.PASSWORD_INVALID,
        ErrorCode.ENQUEUE_REJECTED,
    }
)


class UsageError(ValueError):
    """The arguments cannot work; the message says which and why."""


# ---------------------------------------------------------------- arguments


def parse_state(text: str) -> JobState:
    """A job state by number (PinLater's 0-3) or by name, any case."""
    try:
        return JobState(int(text)) if text.strip().isdigit() else JobState[text.strip().upper()]
    except (KeyError, ValueError):
        names = ", ".join(f"{s.value}={s.name}" for s in JobState)
        raise argparse.ArgumentTypeError(f"unknown job state {text!r} (one of {names})") from None


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinledger client",
        description="Talk to a pinledger (or PinLater) server: PinLater's client tool.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="modes: " + ", ".join(MODES),
    )
    parser.add_argument("positional_mode", nargs="?", metavar="MODE", help="same as --mode")
    parser.add_argument("--mode", help="one of: " + ", ".join(MODES))
    where = parser.add_argument_group("server")
    where.add_argument("--host", default="127.0.0.1", help="server host (default 127.0.0.1)")
    where.add_argument("--port", type=int, default=9010, help="server port (default 9010)")
    where.add_argument(
        "--server_list", help="a file of host:port lines (re-read on change); overrides --host"
    )
    where.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for an answer (default 30)"
    )
    parser.add_argument("--queue", help="queue name")
    load = parser.add_argument_group("load modes (enqueue, dequeue, check_dequeue)")
    load.add_argument("--concurrency", type=int, default=1, help="threads issuing calls")
    load.add_argument("--batch_size", type=int, default=1, help="jobs per call")
    load.add_argument(
        "--num_queries", type=int, default=1, help="calls to issue in all; -1 = until Ctrl-C"
    )
    load.add_argument(
        "--dequeue_success_percent",
        type=int,
        default=100,
        help="percent of dequeued jobs acked as succeeded; the rest fail (default 100)",
    )
    load.add_argument("--body", help="body of enqueued jobs (default: task_<random number>)")
    load.add_argument(
        "--delay_ms", type=int, default=0, help="enqueued jobs become runnable this much later"
    )
    jobs = parser.add_argument_group("job selection")
    jobs.add_argument(
        "--job_descriptor",
        action="append",
        default=[],
        help="a job to look up (repeatable, or comma separated)",
    )
    jobs.add_argument(
        "--priority",
        type=int,
        help="priority: of enqueued jobs (default 1); filter of counts and scans "
        "(default all); of retried or deleted jobs (default 1)",
    )
    jobs.add_argument(
        "--job_state",
        type=parse_state,
        default=JobState.PENDING,
        help="0/PENDING, 1/IN_PROGRESS, 2/SUCCEEDED, 3/FAILED (default 0)",
    )
    jobs.add_argument(
        "--count_future_jobs",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="count or scan jobs runnable later instead of now (true/false)",
    )
    jobs.add_argument("--body_regex", help="only jobs whose body matches (a Postgres regex)")
    jobs.add_argument("--limit", type=int, help="most jobs to scan (100), retry or delete (1000)")
    jobs.add_argument("--continuation", default="0", help="scan: continue from this token")
    jobs.add_argument(
        "--attempts",
        type=int,
        help="attempts of enqueued jobs (default 2) or of retried jobs (default 1)",
    )
    parser.add_argument(
        "--password", help="delete_queue: the admin password (default: ask, or $PINLEDGER_PASSWORD)"
    )
    return parser


@dataclass(frozen=True, slots=True)
class Options:
    mode: str
    host: str
    port: int
    server_list: str | None
    timeout: float
    queue: str | None
    concurrency: int
    batch_size: int
    num_queries: int
    dequeue_success_percent: int
    body: str | None
    delay_ms: int
    job_descriptors: list[str]
    priority: int | None
    job_state: JobState
    count_future_jobs: bool
    body_regex: str | None
    limit: int | None
    continuation: str
    attempts: int | None
    password: str | None


def parse_options(argv: Sequence[str]) -> Options:
    """Parse and check the arguments; UsageError says what is wrong."""
    args = build_parser().parse_args(list(argv))
    mode = args.mode or args.positional_mode
    if args.mode and args.positional_mode and args.mode != args.positional_mode:
        raise UsageError(f"two modes given: {args.positional_mode!r} and --mode {args.mode!r}")
    options = Options(
        mode=mode or "",
        host=args.host,
        port=args.port,
        server_list=args.server_list,
        timeout=args.timeout,
        queue=args.queue,
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        num_queries=args.num_queries,
        dequeue_success_percent=args.dequeue_success_percent,
        body=args.body,
        delay_ms=args.delay_ms,
        job_descriptors=[d for item in args.job_descriptor for d in item.split(",") if d],
        priority=args.priority,
        job_state=args.job_state,
        count_future_jobs=args.count_future_jobs,
        body_regex=args.body_regex,
        limit=args.limit,
        continuation=args.continuation,
        attempts=args.attempts,
        password=args.password,
    )
    validate(options)
    return options


def validate(o: Options) -> None:
    if not o.mode:
        raise UsageError("no mode given: --mode one of " + ", ".join(MODES))
    if o.mode not in MODES:
        raise UsageError(f"unknown mode {o.mode!r}: one of " + ", ".join(MODES))
    problems = [
        (
            o.mode not in ("get_queue_names", "lookup") and not o.queue,
            f"--queue is required for mode {o.mode}",
        ),
        (
            o.mode == "lookup" and not o.job_descriptors,
            "--job_descriptor is required for mode lookup",
        ),
        (not 0 < o.port < 65536, f"--port must be 1-65535, got {o.port}"),
        (o.timeout <= 0, f"--timeout must be positive, got {o.timeout}"),
        (o.concurrency < 1, f"--concurrency must be at least 1, got {o.concurrency}"),
        (o.batch_size < 1, f"--batch_size must be at least 1, got {o.batch_size}"),
        (
            o.num_queries < 1 and o.num_queries != -1,
            f"--num_queries must be at least 1, or -1 for no end; got {o.num_queries}",
        ),
        (
            not 0 <= o.dequeue_success_percent <= 100,
            f"--dequeue_success_percent must be 0-100, got {o.dequeue_success_percent}",
        ),
        (
            o.priority is not None and o.priority < 1,
            f"--priority must be at least 1 (1 is the highest), got {o.priority}",
        ),
        (o.delay_ms < 0, f"--delay_ms must not be negative, got {o.delay_ms}"),
        (o.limit is not None and o.limit < 1, f"--limit must be at least 1, got {o.limit}"),
        (
            o.attempts is not None and o.attempts < 1,
            f"--attempts must be at least 1, got {o.attempts}",
        ),
    ]
    for wrong, message in problems:
        if wrong:
            raise UsageError(message)


# ---------------------------------------------------------------- latency statistics


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of values sorted ascending (p in 0-100); 0 when empty."""
    if not ordered:
        return 0.0
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


class Histogram:
    """Latencies in buckets 1% wide, so a run of any length (--num_queries -1) keeps
    bounded memory; a percentile is the upper bound of its bucket, at most 1% high."""

    GROWTH = 1.01
    FLOOR = 1e-6  # one microsecond: everything faster shares the first bucket

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.max = 0.0

    def add(self, value: float) -> None:
        index = math.ceil(math.log(max(value, self.FLOOR) / self.FLOOR, self.GROWTH))
        self.buckets[index] = self.buckets.get(index, 0) + 1
        self.count += 1
        self.max = max(self.max, value)

    def percentile(self, p: float) -> float:
        if not self.count:
            return 0.0
        rank = min(max(math.ceil(p / 100 * self.count), 1), self.count)
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return min(self.FLOOR * self.GROWTH**index, self.max)
        return self.max


@dataclass(slots=True)
class Window:
    """What happened since the last report (or since the start, for the summary)."""

    calls: int = 0
    jobs: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Rates:
    seconds: float
    calls: int
    jobs: int
    errors: int
    p50_ms: float
    p90_ms: float
    p99_ms: float

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (
            f"calls/s {self.calls_per_s:>8,.1f}  jobs/s {self.jobs_per_s:>9,.1f}  "
            f"p50 {self.p50_ms:7.2f} ms  p90 {self.p90_ms:7.2f} ms  p99 {self.p99_ms:7.2f} ms"
            f"  errors {self.errors}"
        )


def window_rates(window: Window, seconds: float) -> Rates:
    ordered = sorted(window.latencies)
    return Rates(
        seconds,
        window.calls,
        window.jobs,
        window.errors,
        percentile(ordered, 50) * 1000,
        percentile(ordered, 90) * 1000,
        percentile(ordered, 99) * 1000,
    )


class Stats:
    """Shared by the load threads; the reporter takes a window each second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window = Window()
        self.total = Histogram()
        self.calls = 0
        self.jobs = 0
        self.errors = 0
        self.error_kinds: dict[str, int] = {}
        self.acked_succeeded = 0
        self.acked_failed = 0

    def record(self, seconds: float, jobs: int) -> None:
        with self._lock:
            self._window.calls += 1
            self._window.jobs += jobs
            self._window.latencies.append(seconds)
            self.total.add(seconds)
            self.calls += 1
            self.jobs += jobs

    def error(self, exc: Exception) -> bool:
        """Count a failed call; True the first time this kind of error is seen."""
        kind = error_line(exc)
        with self._lock:
            self._window.errors += 1
            self.errors += 1
            first = kind not in self.error_kinds
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
            return first

    def acked(self, succeeded: int, failed: int) -> None:
        with self._lock:
            self.acked_succeeded += succeeded
            self.acked_failed += failed

    def take_window(self) -> Window:
        with self._lock:
            window, self._window = self._window, Window()
            return window


def error_line(exc: BaseException) -> str:
    """One line naming what went wrong; PinLaterError carries `CODE: message (from …)`."""
    if isinstance(exc, PinLaterError):
        return str(exc)
    if isinstance(exc, ServerUnavailableError):
        # The client lists the failure of every round; one of each is enough here.
        head, sep, rest = str(exc).partition(" rounds: ")
        text = head + sep + "; ".join(dict.fromkeys(rest.split("; "))) if sep else str(exc)
        return f"cannot reach the server: {text} (is `pinledger serve` running there?)"
    if isinstance(exc, ClientError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------- load modes


class Tickets:
    """Hands out the `--num_queries` calls to the threads; -1 never runs out."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.issued = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.total != -1 and self.issued >= self.total:
                return False
            self.issued += 1
            return True


class LoadRun:
    def __init__(self, client: PinLaterClient, o: Options, out: TextIO) -> None:
        self.client = client
        self.o = o
        self.out = out
        self.stats = Stats()
        self.tickets = Tickets(o.num_queries)
        self.stop = threading.Event()
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._running = 0
        self.fatal: BaseException | None = None
        self.random = random.Random()
        self.available: dict[str, bytes] = {}
        # The first descriptors enqueued, to show (a small run is often followed by a lookup).
        self.enqueued: list[str] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self) -> int:
        o = self.o
        forever = "until Ctrl-C" if o.num_queries == -1 else f"{o.num_queries:,} calls"
        self.say(
            f"{o.mode} on queue {o.queue}: {forever}, {o.concurrency} thread(s), "
            f"batch {o.batch_size}, server {self.client.servers.current()[0]}"
        )
        started = time.monotonic()
        self._running = o.concurrency
        for i in range(o.concurrency):
            threading.Thread(target=self._thread, name=f"load-{i}", daemon=True).start()
        # Waiting on an Event rather than Thread.join: a Ctrl-C that interrupts join()
        # can leave it believing a running thread has ended (CPython 3.11), and the
        # summary would miss the calls still in flight.
        last = started
        try:
            while not self.finished.wait(timeout=max(0.0, last + 1.0 - time.monotonic())):
                now = time.monotonic()
                rates = window_rates(self.stats.take_window(), now - last)
                self.say(f"[{now - started:6.1f}s] {rates.line()}")
                last = now
        except KeyboardInterrupt:
            self.say("interrupted: finishing the calls in flight")
            self.stop.set()
            self.finished.wait()
        elapsed = time.monotonic() - started
        self._summary(elapsed)
        if self.fatal is not None:
            print(f"pinledger client: {error_line(self.fatal)}", file=sys.stderr)
            return 1
        return 1 if self.stats.errors else 0

    def _thread(self) -> None:
        try:
            self._issue()
        finally:
            with self._lock:
                self._running -= 1
                if not self._running:
                    self.finished.set()

    def _issue(self) -> None:
        succeeded: list[Ack] = []
        failed: list[Ack] = []
        while not self.stop.is_set() and self.tickets.take():
            started = time.perf_counter()
            try:
                jobs = self._call(succeeded, failed)
            except PinLaterError as exc:
                if exc.code in FATAL_CODES:
                    self.fatal = exc
                    self.stop.set()
                    break
                if self.stats.error(exc):
                    print(f"pinledger client: {error_line(exc)}", file=sys.stderr, flush=True)
                continue
            except ClientError as exc:
                if self.stats.error(exc):
                    print(f"pinledger client: {error_line(exc)}", file=sys.stderr, flush=True)
                continue
            self.stats.record(time.perf_counter() - started, jobs)
        if succeeded or failed:
            # The last acks have no next dequeue to ride on.
            try:
                self.client.ack(self.o.queue or "", succeeded, failed)
                self.stats.acked(len(succeeded), len(failed))
            except ClientError as exc:
                self.stats.error(exc)
                print(
                    f"pinledger client: {len(succeeded) + len(failed)} acks not sent: "
                    f"{error_line(exc)}",
                    file=sys.stderr,
                    flush=True,
                )

    def _call(self, succeeded: list[Ack], failed: list[Ack]) -> int:
        """One call; returns how many jobs it carried."""
        o = self.o
        queue = o.queue or ""
        if o.mode == "enqueue":
            batch = [
                Job(
                    (o.body or f"task_{self.random.randrange(2**31)}").encode(),
                    priority=o.priority or 1,
                    run_after_ms=after_ms(o.delay_ms / 1000) if o.delay_ms else None,
                    attempts_allowed=o.attempts or 2,
                )
                for _ in range(o.batch_size)
            ]
            descriptors = self.client.enqueue(queue, batch)
            if len(self.enqueued) < SHOWN:
                with self._lock:
                    self.enqueued.extend(descriptors[: SHOWN - len(self.enqueued)])
            return len(descriptors)
        if o.mode == "check_dequeue":
            found = self.client.dequeue(queue, o.batch_size, dry_run=True)
            for job in found:
                self.available[job.descriptor] = job.body
            return len(found)
        # dequeue: the acks of the previous batch ride on this call. If the call fails,
        # they stay pending: an ack that did apply is rejected as a repeat by the ledger.
        got = self.client.dequeue(queue, o.batch_size, succeeded=succeeded, failed=failed)
        self.stats.acked(len(succeeded), len(failed))
        succeeded.clear()
        failed.clear()
        for job in got:
            if self.random.randrange(100) < o.dequeue_success_percent:
                succeeded.append(Ack(job.descriptor, " ok"))
            else:
                failed.append(Ack(job.descriptor, " failed by pinledger client"))
        return len(got)

    def _summary(self, elapsed: float) -> None:
        s = self.stats
        total = s.total
        o = self.o
        self.say(
            f"summary: {o.mode} {s.calls:,} calls ({s.jobs:,} jobs) in {elapsed:.2f}s, "
            f"{o.concurrency} thread(s), batch {o.batch_size}"
        )
        calls_per_s = s.calls / elapsed if elapsed > 0 else 0.0
        jobs_per_s = s.jobs / elapsed if elapsed > 0 else 0.0
        self.say(f"  calls/s {calls_per_s:,.1f}  jobs/s {jobs_per_s:,.1f}")
        self.say(
            f"  latency p50 {total.percentile(50) * 1000:.2f} ms  "
            f"p90 {total.percentile(90) * 1000:.2f} ms  "
            f"p99 {total.percentile(99) * 1000:.2f} ms  max {total.max * 1000:.2f} ms"
        )
        if o.mode == "dequeue":
            self.say(f"  acked {s.acked_succeeded:,} succeeded, {s.acked_failed:,} failed")
        if self.enqueued:
            more = ", ..." if s.jobs > len(self.enqueued) else ""
            self.say(f"  enqueued {', '.join(self.enqueued)}{more}")
        if o.mode == "check_dequeue":
            self.say(
                f"  jobs available for dequeue: {'yes' if self.available else 'no'} "
                f"({len(self.available):,} seen, dry run: nothing claimed)"
            )
            for descriptor, body in sorted(self.available.items())[:SHOWN]:
                self.say(f"    {descriptor}  {_body(body)}")
        self.say(f"  errors {s.errors:,}")
        for kind, count in sorted(s.error_kinds.items()):
            self.say(f"    {count:,} x {kind}")


# ---------------------------------------------------------------- one-call modes


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _body(body: bytes | None, width: int = 60) -> str:
    if body is None:
        return "-"
    text = repr(body)
    return text if len(text) <= width else text[: width - 3] + "..."


def _priority_of(descriptor: str) -> str:
    parts = descriptor.split(":")
    return parts[2][1:] if len(parts) == 4 and parts[2].startswith("p") else "?"


def describe(info: JobInfo) -> list[str]:
    return [
        f"job {info.descriptor}",
        f"  state            {info.state.name}",
        f"  priority         {_priority_of(info.descriptor)}",
        f"  attempts         {info.attempts_remaining} of {info.attempts_allowed} left",
        f"  created          {_time(info.created_at_ms)}",
        f"  run after        {_time(info.run_after_ms)}",
        f"  updated          {_time(info.updated_at_ms)}",
        f"  claim            {info.claim or '-'}",
        f"  custom status    {info.custom_status!r}",
        f"  body             {_body(info.body, 200)}",
    ]


def _scope(o: Options) -> str:
    priority = "all priorities" if o.priority is None else f"priority {o.priority}"
    when = "runnable later" if o.count_future_jobs else "runnable now"
    regex = f", body ~ {o.body_regex!r}" if o.body_regex else ""
    return f"{priority}, {when}{regex}"


Say = Callable[[str], None]


def _create(client: PinLaterClient, o: Options, say: Say) -> int:
    client.create_queue(o.queue or "")
    say(f"created queue {o.queue} (or it existed)")
    return 0


def _queue_names(client: PinLaterClient, o: Options, say: Say) -> int:
    names = sorted(client.queue_names())
    say(f"{len(names)} queue(s)")
    for name in names:
        say(f"  {name}")
    return 0


def _lookup(client: PinLaterClient, o: Options, say: Say) -> int:
    found = client.lookup(o.job_descriptors, include_body=True)
    for descriptor in o.job_descriptors:
        if descriptor in found:
            for line in describe(found[descriptor]):
                say(line)
        else:
            say(f"job {descriptor}: not found")
    return 0 if len(found) >= len(set(o.job_descriptors)) else 1


def _count(client: PinLaterClient, o: Options, say: Say) -> int:
    count = client.count(
        o.queue or "",
        o.job_state,
        priority=o.priority,
        count_future=o.count_future_jobs,
        body_regex=o.body_regex,
    )
    say(f"{count} {o.job_state.name} job(s) in queue {o.queue} ({_scope(o)})")
    return 0


def _scan(client: PinLaterClient, o: Options, say: Say) -> int:
    page = client.scan(
        o.queue or "",
        o.job_state,
        priority=o.priority,
        future=o.count_future_jobs,
        continuation=o.continuation,
        limit=o.limit or 100,
        body_regex=o.body_regex,
    )
    say(f"{len(page.jobs)} {o.job_state.name} job(s) in queue {o.queue} ({_scope(o)})")
    if page.jobs:
        say(f"  {'descriptor':<40} {'attempts':>8}  {'run after':<24} custom status")
    for info in page.jobs:
        attempts = f"{info.attempts_remaining}/{info.attempts_allowed}"
        say(
            f"  {info.descriptor:<40} {attempts:>8}  {_time(info.run_after_ms):<24} "
            f"{info.custom_status!r}"
        )
    if page.more:
        say(f"more: --continuation {page.continuation}")
    return 0


def _retry_failed(client: PinLaterClient, o: Options, say: Say) -> int:
    priority, attempts = o.priority or 1, o.attempts or 1
    retried = client.retry_failed(
        o.queue or "", priority=priority, attempts=attempts, limit=o.limit or 1000
    )
    say(
        f"retried {retried} FAILED job(s) of priority {priority} in queue {o.queue} "
        f"({attempts} attempt(s) each)"
    )
    return 0


def _delete_jobs(client: PinLaterClient, o: Options, say: Say) -> int:
    priority = o.priority or 1
    deleted = client.delete_jobs(
        o.queue or "",
        o.job_state,
        priority=priority,
        body_regex=o.body_regex,
        limit=o.limit or 1000,
    )
    say(f"deleted {deleted} {o.job_state.name} job(s) of priority {priority} in queue {o.queue}")
    return 0


def _delete_queue(client: PinLaterClient, o: Options, say: Say) -> int:
    client.delete_queue(o.queue or "", _password(o))
    say(f"deleted queue {o.queue} (or it did not exist)")
    return 0


SINGLE_MODES: dict[str, Callable[[PinLaterClient, Options, Say], int]] = {
    "create": _create,
    "get_queue_names": _queue_names,
    "lookup": _lookup,
    "get_job_count": _count,
    "scan": _scan,
    "retry_failed": _retry_failed,
    "delete_jobs": _delete_jobs,
    "delete_queue": _delete_queue,
}


def run_single(client: PinLaterClient, o: Options, out: TextIO) -> int:
    return SINGLE_MODES[o.mode](client, o, lambda text: print(text, file=out))


def _password(o: Options) -> str:
    if o.password is not None:
        return o.password
    if os.environ.get("PINLEDGER_PASSWORD"):
        return os.environ["PINLEDGER_PASSWORD"]
    if sys.stdin.isatty():
        return getpass.getpass("admin password: ")
    raise UsageError("delete_queue needs the admin password: --password or $PINLEDGER_PASSWORD")


# ---------------------------------------------------------------- entry point


def connect(o: Options) -> PinLaterClient:
    servers = o.server_list or f"{o.host}:{o.port}"
    return PinLaterClient(
        servers,
        source=f"pinledger-client:{socket.gethostname()}",
        timeout_s=o.timeout,
        pool_size=max(8, o.concurrency),
    )


def main(
    argv: Sequence[str] | None = None,
    out: TextIO | None = None,
    connector: Callable[[Options], PinLaterClient] = connect,
) -> int:
    out = out or sys.stdout
    try:
        o = parse_options(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"pinledger client: {exc}", file=sys.stderr)
        return 2
    try:
        client = connector(o)
    except ClientError as exc:
        print(f"pinledger client: {error_line(exc)}", file=sys.stderr)
        return 1
    try:
        if o.mode in LOAD_MODES:
            return LoadRun(client, o, out).run()
        return run_single(client, o, out)
    except UsageError as exc:
        print(f"pinledger client: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"pinledger client: {error_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pinledger client: interrupted", file=sys.stderr)
        return 130
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
