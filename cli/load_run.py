"""The load modes of `pinledger client` (enqueue, dequeue, check_dequeue): `LoadRun`
issues the calls from its threads, reports each second and sums up at the end."""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from pinledger.cli.load_stats import Stats, window_rates
from pinledger.cli.tool_options import Options
from pinledger.cli.tool_text import body_text, error_line
from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ClientError, ErrorCode, PinLaterError
from pinledger.client.jobs import Ack, Job, after_ms

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


def _on_ctrl_c(stop: Callable[[], None]) -> Callable[[], None]:
    """Route SIGINT to `stop` while a run lasts; returns what puts the previous handler
    back. Off the main thread (where Python installs no handler) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda _signum, _frame: stop())

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore


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
        # Ctrl-C sets `stop` from a signal handler rather than raising KeyboardInterrupt:
        # raised inside Event.wait (or Thread.join), the exception can leave the event's
        # lock held by this thread, and the load threads then block setting `finished`
        # while this one waits for it, for good (CPython 3.11; a CI run hung so).
        restore = _on_ctrl_c(self.stop.set)
        last = started
        announced = False
        try:
            while not self.finished.wait(timeout=max(0.0, last + 1.0 - time.monotonic())):
                now = time.monotonic()
                if self.stop.is_set():
                    if not announced and self.fatal is None:
                        self.say("interrupted: finishing the calls in flight")
                        announced = True
                    last = now
                    continue
                rates = window_rates(self.stats.take_window(), now - last)
                self.say(f"[{now - started:6.1f}s] {rates.line()}")
                last = now
        finally:
            restore()
        if self.stop.is_set() and not announced and self.fatal is None:
            self.say("interrupted: the calls in flight finished")
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
                self.say(f"    {descriptor}  {body_text(body)}")
        self.say(f"  errors {s.errors:,}")
        for kind, count in sorted(s.error_kinds.items()):
            self.say(f"    {count:,} x {kind}")
