"""What a finished handler run becomes (pinledger.client.worker.outcome.settle): one row
per case of the table (returned or raised, reschedule asked for or not, attempts left
or the last one, a policy that retries, says never or breaks), and the properties that
hold for every run."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.client.jobs import Ack, Checkpoint, DequeuedJob
from pinledger.client.retry import RetryPolicy, constant, exponential, never
from pinledger.client.worker.outcome import RUN_OUTCOMES, Outcome, Settlement, settle

D = "q:s1:p0:7"


def job(allowed: int = 3, remaining: int = 3) -> DequeuedJob:
    """A job of three attempts on its first run, unless told otherwise."""
    return DequeuedJob(D, b"body", attempts_allowed=allowed, attempts_remaining=remaining)


def broken_policy(attempt: int) -> int | None:
    raise ZeroDivisionError("policy bug")


NEXT_STEP = Checkpoint(D, new_body="step 2", move_to_pending=True, run_after_ms=123)


@dataclass(frozen=True)
class Row:
    name: str
    job: DequeuedJob
    retry: RetryPolicy
    result: object = None
    error: BaseException | None = None
    reschedule: Checkpoint | None = None
    # What the settlement must be:
    outcome: Outcome = Outcome.SUCCEEDED
    ack: Ack | None = None
    checkpoint: Checkpoint | None = None
    stops_worker: bool = False
    policy_failed: bool = False


ROWS = [
    Row(
        "returned None: succeeded, nothing appended",
        job(),
        constant(5),
        result=None,
        ack=Ack(D, append_status=""),
    ),
    Row(
        "returned a string: appended to the custom status",
        job(),
        constant(5),
        result="sent",
        ack=Ack(D, append_status="sent"),
    ),
    Row(
        "returned a string longer than PinLater's status: capped at 5000",
        job(),
        constant(5),
        result="x" * 6000,
        ack=Ack(D, append_status="x" * 5000),
    ),
    Row(
        "returned something else than a string: nothing appended",
        job(),
        constant(5),
        result=42,
        ack=Ack(D, append_status=""),
    ),
    Row(
        "succeeded on the last attempt: still a success",
        job(3, 1),
        constant(5),
        result="ok",
        ack=Ack(D, append_status="ok"),
    ),
    Row(
        "rescheduled: no ack, the reschedule checkpoint ends the claim",
        job(),
        constant(5),
        result="ignored",
        reschedule=NEXT_STEP,
        outcome=Outcome.RELEASED,
        checkpoint=NEXT_STEP,
    ),
    Row(
        "rescheduled on the last attempt: rescheduled all the same",
        job(3, 1),
        never,
        reschedule=NEXT_STEP,
        outcome=Outcome.RELEASED,
        checkpoint=NEXT_STEP,
    ),
    Row(
        "raised with attempts left: retried after the policy's delay",
        job(),
        constant(5),
        error=ValueError("boom"),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status="attempt 1 failed: ValueError: boom; retry in 5 s\n",
            retry_delay_ms=5000,
        ),
    ),
    Row(
        "raised on the second of three attempts: the policy gets attempt 2",
        job(3, 2),
        exponential(1),
        error=ValueError("boom"),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status="attempt 2 failed: ValueError: boom; retry in 2 s\n",
            retry_delay_ms=2000,
        ),
    ),
    Row(
        "raised after a reschedule: the failure wins",
        job(),
        constant(0.5),
        error=ValueError("boom"),
        reschedule=NEXT_STEP,
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status="attempt 1 failed: ValueError: boom; retry in 0.5 s\n",
            retry_delay_ms=500,
        ),
    ),
    Row(
        "raised on the last attempt: failed for good, no delay",
        job(3, 1),
        constant(5),
        error=ValueError("boom"),
        outcome=Outcome.FAILED,
        ack=Ack(D, append_status="attempt 3 failed: ValueError: boom; no attempts left\n"),
    ),
    Row(
        "raised on the only attempt: failed for good",
        job(1, 1),
        constant(5),
        error=ValueError("boom"),
        outcome=Outcome.FAILED,
        ack=Ack(D, append_status="attempt 1 failed: ValueError: boom; no attempts left\n"),
    ),
    Row(
        "raised with attempts left, policy never: the budget is lowered first",
        job(),
        never,
        error=ValueError("boom"),
        outcome=Outcome.FAILED,
        ack=Ack(
            D,
            append_status="attempt 1 failed: ValueError: boom; not retried (retry policy: never)\n",
        ),
        checkpoint=Checkpoint(D, attempts_allowed=1),
    ),
    Row(
        "raised on the last attempt, policy never: no budget to lower",
        job(3, 1),
        never,
        error=ValueError("boom"),
        outcome=Outcome.FAILED,
        ack=Ack(D, append_status="attempt 3 failed: ValueError: boom; no attempts left\n"),
    ),
    Row(
        "the policy itself raised: retried at once, the policy's error handed back",
        job(),
        broken_policy,
        error=ValueError("boom"),
        outcome=Outcome.RETRIED,
        ack=Ack(D, append_status="attempt 1 failed: ValueError: boom; retry in 0 s\n"),
        policy_failed=True,
    ),
    Row(
        "the policy raised on the last attempt: failed for good",
        job(3, 1),
        broken_policy,
        error=ValueError("boom"),
        outcome=Outcome.FAILED,
        ack=Ack(D, append_status="attempt 3 failed: ValueError: boom; no attempts left\n"),
        policy_failed=True,
    ),
    Row(
        "an exception with no message: its type alone",
        job(),
        constant(1),
        error=RuntimeError(),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D, append_status="attempt 1 failed: RuntimeError; retry in 1 s\n", retry_delay_ms=1000
        ),
    ),
    Row(
        "a multi-line message: kept on one line",
        job(),
        constant(1),
        error=ValueError("line one\nline two"),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status="attempt 1 failed: ValueError: line one line two; retry in 1 s\n",
            retry_delay_ms=1000,
        ),
    ),
    Row(
        "a message no store can hold (NUL, a surrogate): escaped, the ack is not refused",
        job(),
        constant(1),
        error=ValueError("bad\x00byte \udcff é"),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status="attempt 1 failed: ValueError: bad\\x00byte \\udcff é; retry in 1 s\n",
            retry_delay_ms=1000,
        ),
    ),
    Row(
        "a very long message: cut to 500 characters",
        job(),
        constant(1),
        error=ValueError("y" * 1000),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status=f"attempt 1 failed: ValueError: {'y' * 485}...; retry in 1 s\n",
            retry_delay_ms=1000,
        ),
    ),
    Row(
        "KeyboardInterrupt: a failure like any other, and the worker stops",
        job(),
        constant(1),
        error=KeyboardInterrupt(),
        outcome=Outcome.RETRIED,
        ack=Ack(
            D,
            append_status="attempt 1 failed: KeyboardInterrupt; retry in 1 s\n",
            retry_delay_ms=1000,
        ),
        stops_worker=True,
    ),
    Row(
        "SystemExit on the last attempt: failed for good, and the worker stops",
        job(2, 1),
        constant(1),
        error=SystemExit(3),
        outcome=Outcome.FAILED,
        ack=Ack(D, append_status="attempt 2 failed: SystemExit: 3; no attempts left\n"),
        stops_worker=True,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_settle(row: Row) -> None:
    s = settle(row.job, row.retry, result=row.result, error=row.error, reschedule=row.reschedule)
    assert (s.outcome, s.ack, s.checkpoint) == (row.outcome, row.ack, row.checkpoint)
    assert s.succeeded is (row.outcome is Outcome.SUCCEEDED)
    assert s.stops_worker is row.stops_worker
    assert (s.policy_error is not None) is row.policy_failed
    assert s.line == (row.ack.append_status if row.error is not None and row.ack else "")


def test_the_table_covers_every_outcome() -> None:
    assert {r.outcome for r in ROWS} == set(RUN_OUTCOMES)


# ---- properties over every run ----


@st.composite
def jobs(draw: st.DrawFn) -> DequeuedJob:
    allowed = draw(st.integers(min_value=1, max_value=100))
    remaining = draw(st.integers(min_value=1, max_value=allowed))
    return DequeuedJob(D, b"body", allowed, remaining)


policies: st.SearchStrategy[RetryPolicy] = st.one_of(
    st.integers(min_value=0, max_value=10**9).map(lambda ms: constant(ms / 1000)),
    st.just(never),
    st.just(broken_policy),
)
errors = st.one_of(
    st.none(),
    st.text(max_size=50).map(ValueError),
    st.just(KeyboardInterrupt()),
)
reschedules = st.one_of(st.none(), st.just(NEXT_STEP))
results = st.one_of(st.none(), st.text(max_size=20), st.integers())


@given(jobs(), policies, results, errors, reschedules)
def test_every_run_settles_consistently(
    job: DequeuedJob,
    retry: RetryPolicy,
    result: object,
    error: BaseException | None,
    reschedule: Checkpoint | None,
) -> None:
    s: Settlement = settle(job, retry, result=result, error=error, reschedule=reschedule)
    if error is None:
        # A run that returned: succeeded, or rescheduled when it asked to be.
        assert s.outcome is (Outcome.SUCCEEDED if reschedule is None else Outcome.RELEASED)
        assert (s.ack is None) is (reschedule is not None)
        assert s.checkpoint == reschedule
        assert not s.stops_worker and s.policy_error is None and s.line == ""
        if s.ack is not None:
            assert s.ack.retry_delay_ms == 0
        return
    # A run that raised: always a failure ack of this job, with a line for this attempt.
    assert s.ack is not None and not s.succeeded
    assert s.ack.descriptor == job.descriptor
    assert s.ack.append_status == s.line
    assert s.line.startswith(f"attempt {job.attempt} failed: ")
    # Failed for good exactly on the last attempt or under `never`; only then no delay.
    for_good = job.last_attempt or retry is never
    assert s.outcome is (Outcome.FAILED if for_good else Outcome.RETRIED)
    if for_good:
        assert s.ack.retry_delay_ms == 0
    else:
        assert s.ack.retry_delay_ms == (0 if retry is broken_policy else retry(job.attempt))
    # The budget is lowered only when `never` stops a job that had attempts left.
    lowered = Checkpoint(D, attempts_allowed=1)
    assert s.checkpoint == (lowered if retry is never and not job.last_attempt else None)
    assert (s.policy_error is not None) is (retry is broken_policy)
    assert s.stops_worker is isinstance(error, KeyboardInterrupt)
