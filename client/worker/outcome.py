"""What a finished handler run becomes: which outcome it counts as, and the ack and/or
checkpoint the worker sends for it. A pure function of the run (returned value or
raised exception, a reschedule asked for, the attempt and the attempts left) and the
retry policy: no clock, no I/O, no logging, so every case is tested by a table.

The outcomes, in the order the worker reports them:

- SUCCEEDED: the handler returned; a returned string (capped at PinLater's status size)
  is appended to the custom status by the success ack.
- RELEASED (the worker's "rescheduled"): the handler returned after
  `job.reschedule(...)`: no ack, the checkpoint that moves the job back to PENDING ends
  the claim.
- RETRIED: the handler raised and the job has attempts left: a failure ack with the
  policy's delay and a line `attempt N failed: Type: message; retry in S s`.
- FAILED: the handler raised on the last attempt, or the policy is `never` (a
  checkpoint first lowers the budget to this attempt, so the failure ack makes the job
  FAILED; only the last attempt's failure does).

The words are the ledger's (ledger/outcome.py): a run the worker counts as retried is
the transition the server's metrics and the job's history call retried.

A raise wins over a reschedule asked for earlier in the same run. A policy that raises
counts as a delay of 0 (retry now); the error is handed back for the caller to log.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinledger.client.job_context import MAX_STATUS, error_line
from pinledger.client.jobs import Ack, Checkpoint, DequeuedJob
from pinledger.client.retry import RetryPolicy
from pinledger.ledger.outcome import Outcome

# The outcomes a handler run can have, in the order the worker reports them: a subset
# of the ledger's, so the worker, the metrics and histories use one vocabulary.
RUN_OUTCOMES = (Outcome.SUCCEEDED, Outcome.RETRIED, Outcome.FAILED, Outcome.RELEASED)


@dataclass(frozen=True, slots=True)
class Settlement:
    """What to send for one finished run. `checkpoint` must reach the server before
    `ack`; with no ack, the checkpoint ends the claim."""

    outcome: Outcome
    ack: Ack | None = None
    checkpoint: Checkpoint | None = None
    # The custom-status line of a failure ("" otherwise), for the worker's log.
    line: str = ""
    # The retry policy raised this (the run was then retried at once).
    policy_error: Exception | None = None
    # The handler raised KeyboardInterrupt or SystemExit: the worker should stop.
    stops_worker: bool = False

    @property
    def succeeded(self) -> bool:
        """The ack goes in the `succeeded` list (else in `failed`)."""
        return self.outcome is Outcome.SUCCEEDED


def settle(
    job: DequeuedJob,
    retry: RetryPolicy,
    *,
    result: object = None,
    error: BaseException | None = None,
    reschedule: Checkpoint | None = None,
) -> Settlement:
    """The settlement of a run of `job` that returned `result` or raised `error`, after
    `reschedule` (the checkpoint `JobContext.reschedule` built, if it was called)."""
    if error is not None:
        return _failure(job, retry, error)
    if reschedule is not None:
        return Settlement(Outcome.RELEASED, checkpoint=reschedule)
    status = result[:MAX_STATUS] if isinstance(result, str) else ""
    return Settlement(Outcome.SUCCEEDED, ack=Ack(job.descriptor, append_status=status))


def _failure(job: DequeuedJob, retry: RetryPolicy, error: BaseException) -> Settlement:
    policy_error: Exception | None = None
    try:
        delay = retry(job.attempt)
    except Exception as exc:
        policy_error, delay = exc, 0
    budget: Checkpoint | None = None
    if job.last_attempt:
        text, outcome, delay_ms = "no attempts left", Outcome.FAILED, 0
    elif delay is None:
        text, outcome, delay_ms = "not retried (retry policy: never)", Outcome.FAILED, 0
        # Only the last attempt's failure makes a job FAILED: make this one the last.
        budget = Checkpoint(job.descriptor, attempts_allowed=1)
    else:
        text, outcome, delay_ms = f"retry in {delay / 1000:g} s", Outcome.RETRIED, delay
    line = error_line(job.attempt, error, text)
    return Settlement(
        outcome,
        ack=Ack(job.descriptor, append_status=line, retry_delay_ms=delay_ms),
        checkpoint=budget,
        line=line,
        policy_error=policy_error,
        stops_worker=isinstance(error, KeyboardInterrupt | SystemExit),
    )


__all__ = ["RUN_OUTCOMES", "Outcome", "Settlement", "settle"]
