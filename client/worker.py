"""`Worker`: runs a handler for every job of a queue, with retries, heartbeats and a
graceful shutdown.

    from pinledger.client import PinLaterClient
    from pinledger.client.job_context import JobContext
    from pinledger.client.retry import exponential
    from pinledger.client.worker import Worker, worker_source

    def send_email(job: JobContext) -> str | None:
        deliver(job.body)                  # raise to fail: the job is retried
        return "sent"                      # appended to the job's custom status

    with PinLaterClient("127.0.0.1:9010", source=worker_source("mailer")) as pl:
        Worker(pl, "emails", send_email, retry=exponential(1, cap_s=300)).run()

What the worker does with a job:

- It dequeues up to `batch_size` jobs at a time, when nothing it holds is waiting for a
  thread and a thread is free, and runs them on `concurrency` threads. It holds at
  most `concurrency - 1 + batch_size` claims; for jobs that run long, keep `batch_size`
  at or below `concurrency` so none waits behind another.
- A handler that returns succeeded (a returned string is appended to the job's custom
  status). A handler that raises failed: the failure ack carries the retry policy's
  delay and a line `attempt N failed: Type: message` for the custom status. Whether the
  job comes back is the job's attempt budget (see client.retry).
- Acks ride on the next dequeue call (one round trip for both). When there is nothing
  to dequeue for (every thread busy, or stopping) they go out with ackDequeuedJobs.
  A call that fails is logged and repeated with a growing pause: acks are safe to
  repeat, the ledger rejects one that already applied.
- Every `heartbeat_s` (default: a third of the claim timeout) one checkpointJobs call
  renews the claim of every job the worker holds, so a job may run longer than the
  server's claim timeout.
- An empty queue makes the worker wait, twice as long each time from `idle_backoff[0]`
  up to `idle_backoff[1]`; a dequeue that finds work resets the wait.
- `stop()`, SIGTERM or SIGINT (handlers installed when `run()` is called from the main
  thread) stop the dequeuing; jobs that have not started are released at once, running
  ones get `grace_s` to finish; the ones still running then are released too
  (checkpoint moveToPending: back to PENDING, due now, with no attempt used) and their
  result, should they finish later, is dropped. Every pending ack and release is sent
  before `run()` returns. A second signal skips what is left of the grace period.

Claims and the worker's identity: PinLater acks carry no claim, so the ledger accepts an
ack only from the `RequestContext.source` that claimed the job. Give each worker
process its own source (`worker_source(name)`: name:host:pid) so that one worker's late
ack can never land on another worker's claim of the same job.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ClientError, ErrorCode, PinLaterError
from pinledger.client.job_context import MAX_STATUS, JobContext, error_line
from pinledger.client.jobs import Ack, Checkpoint, DequeuedJob
from pinledger.client.retry import RetryPolicy, exponential
from pinledger.client.tracing import job_span

log = logging.getLogger("pinledger.worker")

# How long acks may wait for a dequeue to ride on while every thread is busy.
MAX_ACK_DELAY_S = 1.0
# The pause after a failed call, doubling up to the maximum.
ERROR_BACKOFF = (0.2, 10.0)

Handler = Callable[[JobContext], str | None]


def worker_source(name: str) -> str:
    """A RequestContext.source unique to this process: `name:host:pid`."""
    return f"{name}:{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class WorkerCounters:
    """Handler outcomes. `processed` counts every handler run that finished; each
    finished run is exactly one of succeeded, retried (failed with attempts left: it
    comes back after the policy's delay), failed (failed for good: last attempt or the
    `never` policy) or rescheduled. `released` counts jobs handed back at shutdown."""

    processed: int = 0
    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    rescheduled: int = 0
    released: int = 0


class Worker:
    """Runs `handler` for the jobs of `queue`; see the module text for the behaviour.

    `heartbeat_s` None means a third of `claim_timeout_s` (which must match the
    server's PINLEDGER_CLAIM_TIMEOUT_S); 0 turns heartbeats off. `use_processes=True` is
    reserved (not implemented: run several worker processes instead).
    """

    def __init__(
        self,
        client: PinLaterClient,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 4,
        batch_size: int = 10,
        retry: RetryPolicy | None = None,
        claim_timeout_s: float = 600.0,
        heartbeat_s: float | None = None,
        idle_backoff: tuple[float, float] = (0.05, 2.0),
        grace_s: float = 30.0,
        flush_timeout_s: float = 60.0,
        name: str | None = None,
        use_processes: bool = False,
    ) -> None:
        if use_processes:
            raise NotImplementedError(
                "use_processes: handlers run on threads only for now; for CPU-bound jobs "
                "run several worker processes (each with its own worker_source)"
            )
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if not 1 <= batch_size <= 1000:
            raise ValueError(f"batch_size must be between 1 and 1000, not {batch_size}")
        if claim_timeout_s <= 0:
            raise ValueError(f"claim_timeout_s must be positive, not {claim_timeout_s}")
        low, high = idle_backoff
        if not 0 < low <= high:
            raise ValueError(
                f"idle_backoff must be (min, max) with 0 < min <= max, not {idle_backoff}"
            )
        if grace_s < 0 or flush_timeout_s < 0:
            raise ValueError("grace_s and flush_timeout_s cannot be negative")
        if heartbeat_s is None:
            heartbeat_s = claim_timeout_s / 3
        if heartbeat_s >= claim_timeout_s:
            raise ValueError(
                f"heartbeat_s ({heartbeat_s}) must be shorter than claim_timeout_s "
                f"({claim_timeout_s}), or 0 for no heartbeats"
            )
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.retry: RetryPolicy = (
            retry if retry is not None else exponential(1, cap_s=300, jitter=0.2)
        )
        self.claim_timeout_s = claim_timeout_s
        self.heartbeat_s = max(heartbeat_s, 0.0)
        self.idle_backoff = (low, high)
        self.grace_s = grace_s
        self.flush_timeout_s = flush_timeout_s
        self.name = name or f"worker[{queue}]"
        self.counters = WorkerCounters()

        # Everything below is guarded by _lock. A reentrant lock, because a signal
        # handler runs on the main thread, possibly while that thread holds it.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._backlog: deque[DequeuedJob] = deque()
        self._running: dict[str, JobContext] = {}
        # Claims the worker still holds: dequeued, and no ack or release sent yet.
        self._held: set[str] = set()
        # Running jobs handed back at shutdown: their result is dropped.
        self._abandoned: set[str] = set()
        # Outbox, in the order it must reach the server: checkpoints first (a `never`
        # failure lowers the budget before its ack), then acks.
        self._checkpoints: list[tuple[Checkpoint, bool]] = []  # (checkpoint, ends the claim)
        self._acks: list[tuple[bool, Ack]] = []  # (succeeded, ack)
        self._oldest_ack: float | None = None
        self._draining = False
        self._threads_exit = False

        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self._started = False

    # ---- counters, for tools and demos ----

    @property
    def processed(self) -> int:
        return self.counters.processed

    @property
    def succeeded(self) -> int:
        return self.counters.succeeded

    @property
    def failed(self) -> int:
        return self.counters.failed

    @property
    def retried(self) -> int:
        return self.counters.retried

    # ---- control ----

    def stop(self) -> None:
        """Ask the worker to shut down gracefully; `run()` returns when it is done.
        Safe from any thread and from a signal handler."""
        self._stopping.set()
        self._wake()

    def stop_now(self) -> None:
        """Shut down without waiting for running jobs: release them at once."""
        self._hurry.set()
        self.stop()

    def start(self) -> threading.Thread:
        """Run the worker on a background thread (no signal handlers); `stop()` it and
        join the thread."""
        thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        """Work until stopped; returns after the shutdown has flushed every ack."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"{self.name} has run already; make a new Worker")
            self._started = True
        restore = self._install_signals()
        threads = [
            threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        if self.heartbeat_s:
            threads.append(
                threading.Thread(target=self._heartbeats, name=f"{self.name}-hb", daemon=True)
            )
        for thread in threads:
            thread.start()
        log.info(
            "%s: working on queue %r with %d threads, batches of %d, retry %r, heartbeat %s",
            self.name,
            self.queue,
            self.concurrency,
            self.batch_size,
            self.retry,
            f"every {self.heartbeat_s:g} s" if self.heartbeat_s else "off",
        )
        try:
            self._loop()
        finally:
            try:
                self._shutdown()
            finally:
                with self._lock:
                    self._threads_exit = True
                    self._changed.notify_all()
                restore()
        c = self.counters
        log.info(
            "%s: stopped: %d processed (%d succeeded, %d retried, %d failed, %d rescheduled), "
            "%d released",
            self.name,
            c.processed,
            c.succeeded,
            c.retried,
            c.failed,
            c.rescheduled,
            c.released,
        )

    def _wake(self) -> None:
        # From a signal handler the main thread may be inside this lock already (fine,
        # it is reentrant); another thread may hold it, and then the loop's bounded
        # waits notice the event soon enough.
        if self._lock.acquire(blocking=False):
            try:
                self._changed.notify_all()
            finally:
                self._lock.release()

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stopping.is_set():
                log.warning("%s: %s again: releasing running jobs now", self.name, name)
                self.stop_now()
                return
            log.warning(
                "%s: %s: stopping; running jobs get %g s to finish, then go back to the "
                "queue (send %s again to release them now)",
                self.name,
                name,
                self.grace_s,
                name,
            )
            self.stop()

        for sig in previous:
            signal.signal(sig, on_signal)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    # ---- the main loop: dequeue, piggyback acks, back off ----

    def _loop(self) -> None:
        idle = self.idle_backoff[0]
        errors = ERROR_BACKOFF[0]
        # After a failed dequeue its acks may or may not have applied: they go out
        # first by ackDequeuedJobs, which the client may repeat on another server.
        resend = False
        while not self._stopping.is_set():
            if not self._send_checkpoints() or (resend and not self._send_acks()):
                errors = self._pause_after_error(errors)
                continue
            resend = False
            with self._lock:
                free = not self._backlog and len(self._running) < self.concurrency
                acks = self._take_acks() if free else []
            if not free:
                if self._acks_due() and not self._send_acks():
                    errors = self._pause_after_error(errors)
                    continue
                errors = ERROR_BACKOFF[0]
                self._wait(min(MAX_ACK_DELAY_S, 0.5), until=self._has_room)
                continue
            jobs = self._dequeue(acks)
            if jobs is None:
                resend = True
                errors = self._pause_after_error(errors)
                continue
            errors = ERROR_BACKOFF[0]
            if jobs:
                idle = self.idle_backoff[0]
                continue
            self._wait(idle, until=self._has_acks)
            idle = min(idle * 2, self.idle_backoff[1])

    def _dequeue(self, acks: list[tuple[bool, Ack]]) -> list[DequeuedJob] | None:
        """One dequeue carrying `acks`; the jobs (handed to the threads), or None after
        a failure (the acks are put back, to be sent again)."""
        succeeded = [a for ok, a in acks if ok]
        failed = [a for ok, a in acks if not ok]
        try:
            jobs = self.client.dequeue(
                self.queue, self.batch_size, succeeded=succeeded, failed=failed
            )
        except PinLaterError as exc:
            if exc.code is ErrorCode.DEQUEUE_RATE_LIMITED:
                # The server applies piggybacked acks before it checks the rate.
                self._acks_sent(acks)
                return []
            self._put_back(acks)
            hint = (
                f" (create it with `pinledger client --mode create --queue {self.queue}`)"
                if exc.code is ErrorCode.QUEUE_NOT_FOUND
                else ""
            )
            log.error("%s: dequeue refused: %s%s; retrying", self.name, exc, hint)
            return None
        except ClientError as exc:
            self._put_back(acks)
            log.warning(
                "%s: dequeue failed: %s; %d acks kept to send again; retrying (is the server up?)",
                self.name,
                exc,
                len(acks),
            )
            return None
        self._acks_sent(acks)
        if jobs:
            with self._lock:
                for job in jobs:
                    self._held.add(job.descriptor)
                    self._backlog.append(job)
                self._changed.notify_all()
        return jobs

    def _pause_after_error(self, pause: float) -> float:
        self._wait(pause, until=lambda: False)
        return min(pause * 2, ERROR_BACKOFF[1])

    def _wait(self, seconds: float, until: Callable[[], bool]) -> None:
        """Sleep up to `seconds`, waking early on stop or when `until()` holds."""
        deadline = time.monotonic() + seconds
        with self._lock:
            while not self._stopping.is_set() and not until():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                # Bounded, so that a stop() that could not notify is seen soon.
                self._changed.wait(min(left, 0.2))

    def _has_room(self) -> bool:
        return (
            (not self._backlog and len(self._running) < self.concurrency)
            or bool(self._checkpoints)
            or self._acks_due()
        )

    def _has_acks(self) -> bool:
        return bool(self._acks)

    # ---- the outbox ----

    def _take_acks(self) -> list[tuple[bool, Ack]]:
        """The acks that may go now: not those of a job whose checkpoint is still to
        be sent (it must reach the server first)."""
        first = {c.descriptor for c, _ in self._checkpoints}
        acks = [a for a in self._acks if a[1].descriptor not in first]
        self._acks = [a for a in self._acks if a[1].descriptor in first]
        self._oldest_ack = time.monotonic() if self._acks else None
        return acks

    def _put_back(self, acks: list[tuple[bool, Ack]]) -> None:
        if acks:
            with self._lock:
                self._acks[:0] = acks
                self._oldest_ack = time.monotonic()

    def _acks_sent(self, acks: list[tuple[bool, Ack]]) -> None:
        if acks:
            with self._lock:
                self._held.difference_update(a.descriptor for _, a in acks)

    def _acks_due(self) -> bool:
        with self._lock:
            if not self._acks or self._oldest_ack is None:
                return False
            return (
                len(self._acks) >= self.batch_size
                or time.monotonic() - self._oldest_ack >= MAX_ACK_DELAY_S
            )

    def _send_acks(self) -> bool:
        """Pending acks by ackDequeuedJobs; False (acks kept) when the call failed."""
        with self._lock:
            acks = self._take_acks()
        if not acks:
            return True
        try:
            self.client.ack(
                self.queue,
                succeeded=[a for ok, a in acks if ok],
                failed=[a for ok, a in acks if not ok],
            )
        except ClientError as exc:
            self._put_back(acks)
            log.warning(
                "%s: sending %d acks failed: %s; they are kept and sent again",
                self.name,
                len(acks),
                exc,
            )
            return False
        self._acks_sent(acks)
        return True

    def _send_checkpoints(self) -> bool:
        with self._lock:
            batch = list(self._checkpoints)
        if not batch:
            return True
        try:
            self.client.checkpoint(self.queue, [c for c, _ in batch])
        except ClientError as exc:
            log.warning(
                "%s: sending %d checkpoints failed: %s; they are kept and sent again",
                self.name,
                len(batch),
                exc,
            )
            return False
        with self._lock:
            # Only the main thread sends, so the batch is still the list's head.
            del self._checkpoints[: len(batch)]
            self._held.difference_update(c.descriptor for c, ends in batch if ends)
        return True

    def _flush(self) -> bool:
        """Send every pending checkpoint, then every pending ack; True when all went."""
        return self._send_checkpoints() and self._send_acks()

    # ---- handler threads ----

    def _work(self) -> None:
        while True:
            with self._lock:
                while self._draining or not self._backlog:
                    if self._threads_exit:
                        return
                    self._changed.wait()
                job = self._backlog.popleft()
                if not self._backlog:
                    self._changed.notify_all()  # the main loop may dequeue again
                context = JobContext(self, job, trace.INVALID_SPAN)
                self._running[job.descriptor] = context
            try:
                self._run_one(context)
            finally:
                with self._lock:
                    del self._running[job.descriptor]
                    self._changed.notify_all()

    def _run_one(self, context: JobContext) -> None:
        job = context.job
        error: BaseException | None = None
        result: str | None = None
        with job_span(self.queue, job) as span:
            context.span = span
            try:
                result = self.handler(context)
            except BaseException as exc:  # a handler must never kill its thread
                error = exc
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        if isinstance(error, KeyboardInterrupt | SystemExit):
            log.warning(
                "%s: the handler of %s raised %s: stopping the worker",
                self.name,
                job.descriptor,
                type(error).__name__,
            )
            self.stop()
        if error is not None:
            self._failed(context, error)
        elif context._reschedule is not None:
            self._record(context, checkpoint=context._reschedule, counter="rescheduled")
        else:
            status = result[:MAX_STATUS] if isinstance(result, str) else ""
            self._record(context, ack=(True, Ack(job.descriptor, append_status=status)))

    def _failed(self, context: JobContext, error: BaseException) -> None:
        job = context.job
        try:
            delay = self.retry(job.attempt)
        except Exception:
            log.exception("%s: the retry policy %r failed; retrying now", self.name, self.retry)
            delay = 0
        budget: Checkpoint | None = None
        if job.last_attempt:
            outcome, counter, delay_ms = "no attempts left", "failed", 0
        elif delay is None:
            outcome, counter, delay_ms = "not retried (retry policy: never)", "failed", 0
            # Only the last attempt's failure makes a job FAILED: make this one the last.
            budget = Checkpoint(job.descriptor, attempts_allowed=1)
        else:
            outcome, counter, delay_ms = f"retry in {delay / 1000:g} s", "retried", delay
        line = error_line(job.attempt, error, outcome)
        log.log(
            logging.WARNING if counter == "retried" else logging.ERROR,
            "%s: job %s %s",
            self.name,
            job.descriptor,
            line.strip(),
            exc_info=error if counter == "failed" else None,
        )
        ack = Ack(job.descriptor, append_status=line, retry_delay_ms=delay_ms)
        self._record(context, ack=(False, ack), checkpoint=budget, counter=counter)

    def _record(
        self,
        context: JobContext,
        *,
        ack: tuple[bool, Ack] | None = None,
        checkpoint: Checkpoint | None = None,
        counter: str = "succeeded",
    ) -> None:
        """Queue the outcome of a finished run for the main loop to send."""
        with self._lock:
            if context.descriptor in self._abandoned:
                self._abandoned.discard(context.descriptor)
                log.warning(
                    "%s: job %s finished after it was released at shutdown; its result "
                    "is dropped (the job runs again)",
                    self.name,
                    context.descriptor,
                )
                return
            if checkpoint is not None:
                self._checkpoints.append((checkpoint, ack is None))
            if ack is not None:
                if not self._acks:
                    self._oldest_ack = time.monotonic()
                self._acks.append(ack)
            self.counters.processed += 1
            setattr(self.counters, counter, getattr(self.counters, counter) + 1)
            self._changed.notify_all()

    # ---- heartbeats ----

    def _heartbeats(self) -> None:
        while not self._threads_exit:
            time.sleep(self.heartbeat_s)
            with self._lock:
                if self._threads_exit:
                    return
                held = sorted(self._held)
            if not held:
                continue
            try:
                self.client.checkpoint(self.queue, [Checkpoint(d) for d in held])
            except ClientError as exc:
                log.warning(
                    "%s: heartbeat of %d jobs failed: %s; their claims expire %g s after "
                    "the last heartbeat that reached the server",
                    self.name,
                    len(held),
                    exc,
                    self.claim_timeout_s,
                )

    # ---- shutdown ----

    def _shutdown(self) -> None:
        with self._lock:
            self._draining = True
            waiting = list(self._backlog)
            self._backlog.clear()
            for job in waiting:
                self._release(job.descriptor)
            running = len(self._running)
        if waiting:
            log.info("%s: released %d jobs that had not started", self.name, len(waiting))
        if running:
            log.info("%s: waiting up to %g s for %d running jobs", self.name, self.grace_s, running)
        deadline = time.monotonic() + self.grace_s
        while True:
            with self._lock:
                if not self._running or self._hurry.is_set() or time.monotonic() >= deadline:
                    break
            self._flush()
            with self._lock:
                if self._running and not self._hurry.is_set():
                    self._changed.wait(min(0.2, max(deadline - time.monotonic(), 0)))
        with self._lock:
            late = list(self._running)
            for descriptor in late:
                self._abandoned.add(descriptor)
                self._release(descriptor)
        if late:
            log.warning(
                "%s: %d jobs still running after %g s were released (they run again "
                "elsewhere, without using an attempt)",
                self.name,
                len(late),
                self.grace_s,
            )
        self._flush_all()

    def _release(self, descriptor: str) -> None:
        self._checkpoints.append((Checkpoint(descriptor, move_to_pending=True), True))
        self.counters.released += 1

    def _flush_all(self) -> None:
        deadline = time.monotonic() + self.flush_timeout_s
        pause = ERROR_BACKOFF[0]
        while not self._flush():
            if time.monotonic() + pause > deadline:
                with self._lock:
                    lost = sorted(self._held)
                log.error(
                    "%s: could not reach the server for %g s: %d jobs keep their claims "
                    "until the claim timeout (%g s), then run again: %s",
                    self.name,
                    self.flush_timeout_s,
                    len(lost),
                    self.claim_timeout_s,
                    ", ".join(lost[:20]),
                )
                return
            time.sleep(pause)
            pause = min(pause * 2, ERROR_BACKOFF[1])


__all__ = ["Handler", "JobContext", "Worker", "WorkerCounters", "worker_source"]
