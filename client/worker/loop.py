"""`Worker`: the dequeue loop on the calling thread, the handler threads it feeds, and
the graceful shutdown (see the package text for what a user sees).

Threads: `run()`'s thread dequeues (piggybacking acks), sends the outbox and shuts
down; `concurrency` handler threads take jobs from the backlog; one heartbeat thread
renews claims. The backlog, the running jobs and the shutdown flags are guarded by
the Worker's lock, and `_changed` wakes whoever waits on them; the outbox has a lock
of its own, always taken inside the Worker's (see outbox.py).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from opentelemetry import trace

from pinledger import otel
from pinledger.client.errors import ClientError, ErrorCode, PinLaterError
from pinledger.client.job_context import JobContext
from pinledger.client.jobs import DequeuedJob
from pinledger.client.retry import RetryPolicy, exponential
from pinledger.client.worker.counters import WorkerCounters
from pinledger.client.worker.handler import Handler, run_handler
from pinledger.client.worker.heartbeat import heartbeat_thread
from pinledger.client.worker.options import checked_heartbeat, worker_source
from pinledger.client.worker.outbox import ERROR_BACKOFF, MAX_ACK_DELAY_S, Outbox, PendingAck
from pinledger.client.worker.outcome import Settlement
from pinledger.client.worker.ports import WorkerClient
from pinledger.client.worker.signals import install_stop_signals
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("pinledger.worker")


class Worker:
    """Runs `handler` for the jobs of `queue` of `client` (a PinLaterClient, or any
    WorkerClient); see the package text for the behaviour.

    `heartbeat_s` None means a third of `claim_timeout_s` (which must match the
    server's PINLEDGER_CLAIM_TIMEOUT_S); 0 turns heartbeats off. `use_processes=True` is
    reserved (not implemented: run several worker processes instead). `clock` is where
    the worker reads time (a FakeClock in tests).
    """

    def __init__(
        self,
        client: WorkerClient,
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
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        heartbeat_s = checked_heartbeat(
            concurrency=concurrency,
            batch_size=batch_size,
            claim_timeout_s=claim_timeout_s,
            heartbeat_s=heartbeat_s,
            idle_backoff=idle_backoff,
            grace_s=grace_s,
            flush_timeout_s=flush_timeout_s,
            use_processes=use_processes,
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
        self.heartbeat_s = heartbeat_s
        self.idle_backoff = (idle_backoff[0], idle_backoff[1])
        self.grace_s = grace_s
        self.flush_timeout_s = flush_timeout_s
        self.name = name or f"worker[{queue}]"
        self.clock = clock
        self.counters = WorkerCounters()
        self.outbox = Outbox(client, queue, batch_size=batch_size, clock=clock, name=self.name)

        # Everything below is guarded by _lock. A reentrant lock, because a signal
        # handler runs on the main thread, possibly while that thread holds it.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._backlog: deque[DequeuedJob] = deque()
        self._running: dict[str, JobContext] = {}
        # Running jobs handed back at shutdown: their result is dropped.
        self._abandoned: set[str] = set()
        self._draining = False
        # Set when run() ends: the handler and heartbeat threads exit.
        self._threads_exit = threading.Event()

        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self._started = False
        self._running_loop = False
        # The servers' last answer to a dequeue (monotonic; None before the first), and
        # the error of the dequeues failing since, for the worker's /health.
        self.answered_at: float | None = None
        self.failing: str | None = None

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

    @property
    def in_flight(self) -> int:
        """Jobs a handler thread runs now."""
        return len(self._running)

    @property
    def working(self) -> bool:
        """Whether `run()` is dequeuing: started, and not stopping."""
        return self._running_loop and not self._stopping.is_set()

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
        restore = install_stop_signals(
            self.name,
            self.grace_s,
            stopping=self._stopping,
            stop=self.stop,
            stop_now=self.stop_now,
        )
        # Traces out of the box: the OTEL_* variables set up the SDK unless the
        # application installed its own tracer provider (pinledger/otel.py).
        otel.setup(service_name="pinledger-worker")
        for thread in self._threads():
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
        self._running_loop = True
        try:
            self._loop()
        finally:
            self._running_loop = False
            try:
                self._shutdown()
            finally:
                with self._lock:
                    self._threads_exit.set()
                    self._changed.notify_all()
                restore()
                otel.flush()  # the last jobs' spans, before the process may exit
        log.info("%s: stopped: %s", self.name, self.counters.summary())

    def _threads(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        if self.heartbeat_s:
            threads.append(
                heartbeat_thread(
                    self.client,
                    self.queue,
                    self.outbox,
                    interval_s=self.heartbeat_s,
                    claim_timeout_s=self.claim_timeout_s,
                    clock=self.clock,
                    done=self._threads_exit,
                    name=self.name,
                )
            )
        return threads

    def _wake(self) -> None:
        # From a signal handler the main thread may be inside this lock already (fine,
        # it is reentrant); another thread may hold it, and then the loop's bounded
        # waits notice the event soon enough.
        if self._lock.acquire(blocking=False):
            try:
                self._changed.notify_all()
            finally:
                self._lock.release()

    # ---- the main loop: dequeue, piggyback acks, back off ----

    def _loop(self) -> None:
        idle = self.idle_backoff[0]
        errors = ERROR_BACKOFF[0]
        # After a failed dequeue its acks may or may not have applied: they go out
        # first by ackDequeuedJobs, which the client may repeat on another server.
        resend = False
        while not self._stopping.is_set():
            if not self.outbox.send_checkpoints() or (resend and not self.outbox.send_acks()):
                errors = self._pause_after_error(errors)
                continue
            resend = False
            with self._lock:
                free = self._free()
                acks = self.outbox.take_acks() if free else []
            if not free:
                if self.outbox.acks_due() and not self.outbox.send_acks():
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
            self._wait(idle, until=self.outbox.has_acks)
            idle = min(idle * 2, self.idle_backoff[1])

    def _dequeue(self, acks: list[PendingAck]) -> list[DequeuedJob] | None:
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
                self.outbox.acks_sent(acks)
                self._answered(None)
                return []
            self._answered(f"dequeue refused: {exc}")
            self.outbox.put_back(acks)
            hint = (
                f" (create it with `pinledger client --mode create --queue {self.queue}`)"
                if exc.code is ErrorCode.QUEUE_NOT_FOUND
                else ""
            )
            log.error("%s: dequeue refused: %s%s; retrying", self.name, exc, hint)
            return None
        except ClientError as exc:
            self._answered(f"dequeue failed: {exc}")
            self.outbox.put_back(acks)
            log.warning(
                "%s: dequeue failed: %s; %d acks kept to send again; retrying (is the server up?)",
                self.name,
                exc,
                len(acks),
            )
            return None
        self.outbox.acks_sent(acks)
        self._answered(None)
        if jobs:
            with self._lock:
                self.outbox.hold([job.descriptor for job in jobs])
                self._backlog.extend(jobs)
                self._changed.notify_all()
        return jobs

    def _answered(self, failure: str | None) -> None:
        """Note a dequeue's outcome: answered (None), or why not."""
        if failure is None:
            self.answered_at = self.clock.monotonic()
        self.failing = failure

    def _pause_after_error(self, pause: float) -> float:
        self._wait(pause, until=lambda: False)
        return min(pause * 2, ERROR_BACKOFF[1])

    def _wait(self, seconds: float, until: Callable[[], bool]) -> None:
        """Sleep up to `seconds`, waking early on stop or when `until()` holds."""
        deadline = self.clock.monotonic() + seconds
        with self._lock:
            while not self._stopping.is_set() and not until():
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    return
                # Bounded, so that a stop() that could not notify is seen soon.
                self._changed.wait(min(left, 0.2))

    def _free(self) -> bool:
        """Nothing waits for a thread and a thread is free: time to dequeue."""
        return not self._backlog and len(self._running) < self.concurrency

    def _has_room(self) -> bool:
        return self._free() or self.outbox.has_checkpoints() or self.outbox.acks_due()

    # ---- handler threads ----

    def _work(self) -> None:
        while True:
            with self._lock:
                while self._draining or not self._backlog:
                    if self._threads_exit.is_set():
                        return
                    self._changed.wait()
                job = self._backlog.popleft()
                if not self._backlog:
                    self._changed.notify_all()  # the main loop may dequeue again
                context = JobContext(self, job, trace.INVALID_SPAN)
                self._running[job.descriptor] = context
            try:
                started = self.clock.monotonic()
                settlement = run_handler(
                    self.handler, context, self.retry, name=self.name, stop=self.stop
                )
                self._record(context, settlement, self.clock.monotonic() - started)
            finally:
                with self._lock:
                    del self._running[job.descriptor]
                    self._changed.notify_all()

    def _record(self, context: JobContext, s: Settlement, seconds: float) -> None:
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
            if self.outbox.finished_cancelled(context.descriptor):
                # Cancelled by an operator (decision 0036): FAILED already, nothing to
                # send; acking it would only be rejected.
                log.info("%s: job %s was cancelled; its run ended", self.name, context.descriptor)
                self.counters.count(s.outcome, seconds)
                self._changed.notify_all()
                return
            ack = (s.succeeded, s.ack) if s.ack is not None else None
            self.outbox.add(ack=ack, checkpoint=s.checkpoint)
            self.counters.count(s.outcome, seconds)
            self._changed.notify_all()

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
        self._await_running(self.clock.monotonic() + self.grace_s)
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
        self.outbox.flush_all(self.flush_timeout_s, self.claim_timeout_s)

    def _await_running(self, deadline: float) -> None:
        """Until no job runs, stop_now() or the deadline, sending what they finish."""
        while True:
            with self._lock:
                if not self._running or self._hurry.is_set() or self.clock.monotonic() >= deadline:
                    return
            self.outbox.flush()
            with self._lock:
                if self._running and not self._hurry.is_set():
                    self._changed.wait(min(0.2, max(deadline - self.clock.monotonic(), 0)))

    def _release(self, descriptor: str) -> None:
        self.outbox.release(descriptor)
        self.counters.released += 1


__all__ = ["Worker", "worker_source"]
