"""One run of the user's handler: inside the job's span, never letting an exception
out, settled by the pure `settle` and logged (a success is not logged)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from opentelemetry.trace import Status, StatusCode

from pinledger.client.job_context import JobContext
from pinledger.client.retry import RetryPolicy
from pinledger.client.tracing import job_span
from pinledger.client.worker.outcome import Outcome, Settlement, settle

log = logging.getLogger("pinledger.worker")

Handler = Callable[[JobContext], str | None]


def run_handler(
    handler: Handler,
    context: JobContext,
    retry: RetryPolicy,
    *,
    name: str,
    stop: Callable[[], None],
) -> Settlement:
    """Run `handler` for `context`'s job and settle the run; `stop` is called (before
    the failure is logged) when the handler raised KeyboardInterrupt or SystemExit."""
    job = context.job
    error: BaseException | None = None
    result: str | None = None
    with job_span(context.queue, job) as span:
        context.span = span
        try:
            result = handler(context)
        except BaseException as exc:  # a handler must never kill its thread
            error = exc
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    settlement = settle(job, retry, result=result, error=error, reschedule=context._reschedule)
    if settlement.stops_worker:
        log.warning(
            "%s: the handler of %s raised %s: stopping the worker",
            name,
            job.descriptor,
            type(error).__name__,
        )
        stop()
    if error is not None:
        _log_failure(context, error, settlement, retry, name)
    return settlement


def _log_failure(
    context: JobContext, error: BaseException, s: Settlement, retry: RetryPolicy, name: str
) -> None:
    if s.policy_error is not None:
        log.error(
            "%s: the retry policy %r failed; retrying now", name, retry, exc_info=s.policy_error
        )
    log.log(
        logging.WARNING if s.outcome is Outcome.RETRIED else logging.ERROR,
        "%s: job %s %s",
        name,
        context.descriptor,
        s.line.strip(),
        exc_info=error if s.outcome is Outcome.FAILED else None,
    )


__all__ = ["Handler", "run_handler"]
