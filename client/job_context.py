"""`JobContext`, what a `Worker`'s handler gets for each job, and the custom-status text
the worker writes for an attempt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry import trace

from pinledger.client.errors import JobCancelled
from pinledger.client.jobs import Checkpoint, DequeuedJob
from pinledger.ledger.state import MAX_CUSTOM_STATUS

if TYPE_CHECKING:
    from pinledger.client.worker import Worker

# PinLater caps a job's whole custom status (truncating the end; the ledger's cap); one
# failure line is kept much shorter so that the lines of several attempts fit.
MAX_STATUS = MAX_CUSTOM_STATUS
MAX_ERROR_LINE = 500


class JobContext:
    """What a handler gets: the job, and calls that act on its claim."""

    def __init__(self, worker: Worker, job: DequeuedJob, span: trace.Span) -> None:
        self._worker = worker
        self.job = job
        self.queue = worker.queue
        self.descriptor = job.descriptor
        self.body = job.body
        self.span = span
        self._reschedule: Checkpoint | None = None

    @property
    def attempt(self) -> int:
        """1 on the first run."""
        return self.job.attempt

    @property
    def attempts_allowed(self) -> int:
        return self.job.attempts_allowed

    @property
    def attempts_remaining(self) -> int:
        """Including this one: 1 on the last attempt."""
        return self.job.attempts_remaining

    @property
    def last_attempt(self) -> bool:
        """A failure now makes the job FAILED (whatever the retry policy)."""
        return self.job.last_attempt

    @property
    def rescheduled(self) -> bool:
        return self._reschedule is not None

    @property
    def cancelled(self) -> bool:
        """An operator cancelled the job (cancelJobs), as a heartbeat or checkpoint heard:
        stop its work; the job is FAILED already, and the worker does not ack it."""
        return self._worker.outbox.is_cancelled(self.descriptor)

    def heartbeat(self) -> None:
        """Renew the claim now (the worker does this on its own every heartbeat_s).
        Raises `JobCancelled` when the job was cancelled."""
        self._send(Checkpoint(self.descriptor))

    def checkpoint(self, new_body: bytes | str | None = None, status: str | None = None) -> None:
        """Save progress: replace the body (what the next attempt will see if this one
        fails) and/or prepend `status` to the custom status; renews the claim. Raises
        `JobCancelled` when the job was cancelled (decision 0036): let it propagate (or
        catch it to clean up, and return); the worker then sends nothing for the job."""
        body = _text(new_body)
        self._send(Checkpoint(self.descriptor, new_body=body, prepend_status=status))
        if body is not None:
            self.body = body.encode("utf-8")

    def reschedule(
        self,
        run_after_ms: int | None = None,
        *,
        new_body: bytes | str | None = None,
        status: str | None = None,
        attempts_allowed: int | None = None,
    ) -> None:
        """Run this job again instead of finishing it: when the handler returns, the job
        goes back to PENDING, due at `run_after_ms` (None: now), with `new_body` if given
        (a chained job's next step) and `status` prepended to its custom status. No
        attempt is used; pass `attempts_allowed` to give the next run a fresh budget (a
        cron-like job usually passes `job.attempts_allowed`). If the handler raises after
        this call, the failure wins and the reschedule is dropped."""
        self._reschedule = Checkpoint(
            self.descriptor,
            new_body=_text(new_body),
            move_to_pending=True,
            run_after_ms=run_after_ms,
            attempts_allowed=attempts_allowed,
            prepend_status=status,
        )

    def _send(self, checkpoint: Checkpoint) -> None:
        outbox = self._worker.outbox
        if outbox.is_cancelled(self.descriptor):
            # A heartbeat heard it first: no call needed to say so.
            raise JobCancelled(
                [self.descriptor], f"job cancelled: {self.descriptor} (heard by a heartbeat)"
            )
        try:
            self._worker.client.checkpoint(self.queue, [checkpoint])
        except JobCancelled as exc:
            outbox.cancelled(exc.descriptors)
            raise


def _text(body: bytes | str | None) -> str | None:
    """Checkpoint bodies are Thrift strings: bytes must be UTF-8."""
    if body is None or isinstance(body, str):
        return body
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            "a checkpointed body must be UTF-8 text (PinLater's newBody is a Thrift string); "
            f"encode binary data first, e.g. base64: {exc}"
        ) from None


def error_line(attempt: int, exc: BaseException, outcome: str) -> str:
    """The custom-status line of a failed attempt, short enough for several to fit."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    # The server refuses a status holding NUL or an unpaired surrogate (no store can
    # hold them, ledger/limits.py): written as escapes, the failure is still recorded.
    text = text.replace("\n", " ").replace("\x00", "\\x00")
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_LINE:
        text = text[: MAX_ERROR_LINE - 3] + "..."
    return f"attempt {attempt} failed: {text}; {outcome}\n"
