"""Deciding: validating a request before anything is appended (refusals carry the code
the Thrift edge maps to a PinLater ErrorCode), and selecting the jobs an owner acts on
with the same rules `evolve` enforces, so that what is appended applies."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.commands import (
    Limits,
    NewJob,
    RefusalCode,
    Refused,
    check_limit,
    check_priority,
    check_queue_name,
    decide_checkpoint,
    decide_claims,
    decide_collect,
    decide_delete,
    decide_enqueue,
    decide_failure,
    decide_retry,
    decide_success,
    decide_timeouts,
    is_due,
)
from pinledger.ledger.descriptor import MAX_QUEUE_NAME_LENGTH
from pinledger.ledger.events import (
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Failed,
    JobEvent,
    Retried,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.state import MAX_CUSTOM_STATUS, Job, JobState, evolve
from tests.unit.factories import CLAIM, CLAIMED_AT, NOW, WORKER, make_job, stamp
from tests.unit.strategies import jobs

PENDING = JobState.PENDING
IN_PROGRESS = JobState.IN_PROGRESS
SUCCEEDED = JobState.SUCCEEDED
FAILED = JobState.FAILED
LIMITS = Limits(max_priority=3, max_body_bytes=16)
HOUR = 3_600_000


def refusal(call: Callable[[], object]) -> Refused:
    with pytest.raises(Refused) as raised:
        call()
    assert str(raised.value) == raised.value.message
    return raised.value


# --- check_* ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["emails", "Q", "queue_2", "_", "9" * MAX_QUEUE_NAME_LENGTH])
def test_valid_queue_names_pass(name: str) -> None:
    check_queue_name(name)


@pytest.mark.parametrize("name", ["", "my-queue", "a b", "a:b", "quëue", "٣", "q\n"])
def test_queue_name_outside_letters_digits_underscore_is_invalid(name: str) -> None:
    refused = refusal(lambda: check_queue_name(name))
    assert refused.code is RefusalCode.QUEUE_NAME_INVALID
    assert refused.message == (
        f"queue name {name!r} is invalid: use ASCII letters, digits and '_' only"
    )


def test_queue_name_over_the_limit_is_too_long() -> None:
    refused = refusal(lambda: check_queue_name("q" * (MAX_QUEUE_NAME_LENGTH + 1)))
    assert refused.code is RefusalCode.QUEUE_NAME_TOO_LONG
    assert refused.message == "queue name is 65 characters, the limit is 64"


@pytest.mark.parametrize("priority", [1, 2, 3])
def test_priorities_from_1_to_the_configured_maximum_pass(priority: int) -> None:
    check_priority(priority, LIMITS)


@pytest.mark.parametrize("priority", [0, -1, 4, 127])
def test_priority_out_of_range_is_not_supported(priority: int) -> None:
    refused = refusal(lambda: check_priority(priority, LIMITS))
    assert refused.code is RefusalCode.PRIORITY_NOT_SUPPORTED
    assert refused.message == f"priority {priority} is not supported: use 1 (highest) to 3"


def test_the_priority_limit_is_configurable() -> None:
    check_priority(5, Limits(max_priority=5))
    assert "use 1 (highest) to 1" in refusal(lambda: check_priority(2, Limits(1))).message


@pytest.mark.parametrize("limit", [0, 1, 1000])
def test_non_negative_limits_pass(limit: int) -> None:
    check_limit(limit)


def test_negative_limit_is_refused_naming_the_argument() -> None:
    refused = refusal(lambda: check_limit(-1, "dequeue limit"))
    assert refused.code is RefusalCode.INVALID_ARGUMENT
    assert refused.message == "dequeue limit must not be negative, got -1"
    assert refusal(lambda: check_limit(-5)).message == "limit must not be negative, got -5"


# --- decide_enqueue ---------------------------------------------------------------------


def test_enqueue_defaults_run_after_to_now_and_keeps_the_order() -> None:
    decided = decide_enqueue(
        [
            NewJob(b"first"),
            NewJob(
                b"second", priority=3, run_after=NOW + 10, attempts_allowed=5, custom_status="s"
            ),
        ],
        NOW,
        LIMITS,
    )
    assert decided == [
        Enqueued(body=b"first", priority=1, run_after=NOW, attempts_allowed=2),
        Enqueued(b"second", priority=3, run_after=NOW + 10, attempts_allowed=5, custom_status="s"),
    ]


def test_enqueue_of_no_jobs_decides_nothing() -> None:
    assert decide_enqueue([], NOW, LIMITS) == []


def test_enqueue_truncates_a_long_custom_status() -> None:
    [event] = decide_enqueue([NewJob(b"", custom_status="x" * 6000)], NOW, LIMITS)
    assert event.custom_status == "x" * MAX_CUSTOM_STATUS


def test_enqueue_accepts_a_body_exactly_at_the_limit() -> None:
    [event] = decide_enqueue([NewJob(b"x" * 16)], NOW, LIMITS)
    assert event.body == b"x" * 16


@pytest.mark.parametrize(
    ("bad_job", "code", "message"),
    [
        (
            NewJob(b"", priority=4),
            RefusalCode.PRIORITY_NOT_SUPPORTED,
            "priority 4 is not supported: use 1 (highest) to 3",
        ),
        (
            NewJob(b"", attempts_allowed=0),
            RefusalCode.INVALID_ARGUMENT,
            "job 1: numAttemptsAllowed must be at least 1, got 0",
        ),
        (
            NewJob(b"x" * 17),
            RefusalCode.ENQUEUE_REJECTED,
            "job 1: body is 17 bytes, the limit is 16",
        ),
    ],
    ids=["priority", "attempts", "body-size"],
)
def test_one_invalid_job_refuses_the_whole_enqueue(
    bad_job: NewJob, code: RefusalCode, message: str
) -> None:
    refused = refusal(lambda: decide_enqueue([NewJob(b"ok"), bad_job, NewJob(b"ok")], NOW, LIMITS))
    assert (refused.code, refused.message) == (code, message)


# --- decide_claims ----------------------------------------------------------------------


def _pending(local_id: int, run_after: int = NOW) -> Job:
    return make_job(PENDING, local_id=local_id, run_after=run_after)


def test_claims_take_due_jobs_in_the_order_offered_up_to_the_limit() -> None:
    offered = [_pending(3), _pending(1), _pending(2)]
    assert decide_claims(offered, "c-9", NOW, limit=2) == [Claimed(3, "c-9"), Claimed(1, "c-9")]


def test_claims_skip_jobs_that_are_not_due_or_not_pending() -> None:
    offered = [
        _pending(1, run_after=NOW + 1),
        make_job(IN_PROGRESS, local_id=2),
        make_job(FAILED, local_id=3),
        make_job(SUCCEEDED, local_id=4),
        _pending(5, run_after=NOW),
        _pending(6, run_after=NOW - 1),
    ]
    assert decide_claims(offered, "c", NOW, limit=10) == [Claimed(5, "c"), Claimed(6, "c")]


@pytest.mark.parametrize("limit", [0, -1])
def test_claims_with_no_room_claim_nothing(limit: int) -> None:
    assert decide_claims([_pending(1)], "c", NOW, limit) == []


def test_a_job_is_due_from_its_run_after_on() -> None:
    assert is_due(_pending(1, run_after=NOW), NOW)
    assert not is_due(_pending(1, run_after=NOW + 1), NOW)
    assert not is_due(make_job(FAILED, run_after=NOW - 1), NOW)


# --- Acks and checkpoints ---------------------------------------------------------------


def test_success_ack_carries_the_status_truncated() -> None:
    assert decide_success(7, "done") == Succeeded(7, "done")
    assert decide_success(7, "d" * 6000, claim="c") == Succeeded(7, "d" * 5000, claim="c")


def test_failure_ack_carries_delay_status_and_claim() -> None:
    assert decide_failure(7, 250, "e" * 6000, claim="c") == Failed(7, 250, "e" * 5000, "c")
    assert decide_failure(7, 0, "") == Failed(7)


def test_failure_ack_with_negative_delay_is_refused() -> None:
    refused = refusal(lambda: decide_failure(7, -1, ""))
    assert refused.code is RefusalCode.INVALID_ARGUMENT
    assert refused.message == "retryDelayMillis must not be negative, got -1"


def test_valid_checkpoint_is_decided_as_asked() -> None:
    event = Checkpointed(7, new_body=b"x" * 16, attempts_allowed=1, prepend_status="p")
    assert decide_checkpoint(event, LIMITS) is event
    assert decide_checkpoint(Checkpointed(7), LIMITS) == Checkpointed(7)


def test_checkpoint_resetting_attempts_below_one_is_refused() -> None:
    refused = refusal(lambda: decide_checkpoint(Checkpointed(7, attempts_allowed=0), LIMITS))
    assert refused.code is RefusalCode.INVALID_ARGUMENT
    assert refused.message == "numOfAttemptsAllowed must be at least 1, got 0"


def test_checkpoint_with_a_body_over_the_limit_is_refused() -> None:
    refused = refusal(lambda: decide_checkpoint(Checkpointed(7, new_body=b"x" * 17), LIMITS))
    assert refused.code is RefusalCode.INVALID_ARGUMENT
    assert refused.message == "checkpoint newBody is 17 bytes, the limit is 16"


# --- Timeouts and garbage collection ----------------------------------------------------


def test_claim_times_out_exactly_at_the_deadline() -> None:
    job = make_job(IN_PROGRESS, touched_at=NOW - 600_000)
    assert decide_timeouts([job], NOW - 1, claim_timeout_ms=600_000) == []
    assert decide_timeouts([job], NOW, claim_timeout_ms=600_000) == [
        TimedOut(job.local_id, CLAIM, NOW - 600_000)
    ]


@pytest.mark.parametrize("state", [PENDING, SUCCEEDED, FAILED])
def test_only_claimed_jobs_time_out(state: JobState) -> None:
    assert decide_timeouts([make_job(state, touched_at=0)], NOW, claim_timeout_ms=1) == []


@pytest.mark.parametrize(
    ("state", "ttl"), [(SUCCEEDED, "succeeded_ttl_ms"), (FAILED, "failed_ttl_ms")]
)
def test_finished_job_is_collected_exactly_when_its_ttl_has_passed(
    state: JobState, ttl: str
) -> None:
    job = make_job(state, updated_at=NOW - 24 * HOUR)
    ttls = {"succeeded_ttl_ms": 1_000 * HOUR, "failed_ttl_ms": 1_000 * HOUR, ttl: 24 * HOUR}
    assert decide_collect([job], NOW - 1, **ttls) == []
    assert decide_collect([job], NOW, **ttls) == [Collected(job.local_id)]


def test_each_finished_state_has_its_own_ttl() -> None:
    succeeded = make_job(SUCCEEDED, local_id=1, updated_at=NOW - 30 * HOUR)
    failed = make_job(FAILED, local_id=2, updated_at=NOW - 30 * HOUR)
    decided = decide_collect([succeeded, failed], NOW, 24 * HOUR, 168 * HOUR)
    assert decided == [Collected(1)]


@pytest.mark.parametrize("state", [PENDING, IN_PROGRESS])
def test_unfinished_jobs_are_never_collected(state: JobState) -> None:
    assert decide_collect([make_job(state, updated_at=0)], NOW, 0, 0) == []


# --- retryFailedJobs and deleteJobs -----------------------------------------------------


def test_retry_moves_up_to_limit_failed_jobs_with_run_after_defaulting_to_now() -> None:
    offered = [
        make_job(FAILED, local_id=1),
        make_job(PENDING, local_id=2),
        make_job(FAILED, local_id=3),
        make_job(FAILED, local_id=4),
    ]
    assert decide_retry(offered, attempts=2, run_after=None, now=NOW, limit=2) == [
        Retried(1, 2, NOW),
        Retried(3, 2, NOW),
    ]


def test_retry_uses_the_given_run_after() -> None:
    [event] = decide_retry([make_job(FAILED)], attempts=1, run_after=NOW + 5, now=NOW, limit=9)
    assert event.run_after == NOW + 5


def test_retry_with_limit_zero_retries_nothing() -> None:
    assert decide_retry([make_job(FAILED)], attempts=1, run_after=None, now=NOW, limit=0) == []


def test_retry_refuses_fewer_than_one_attempt_and_negative_limits() -> None:
    attempts = refusal(lambda: decide_retry([], attempts=0, run_after=None, now=NOW, limit=1))
    assert attempts.message == "attemptsToAllow must be at least 1, got 0"
    limit = refusal(lambda: decide_retry([], attempts=1, run_after=None, now=NOW, limit=-1))
    assert limit.message == "limit must not be negative, got -1"
    assert attempts.code is limit.code is RefusalCode.INVALID_ARGUMENT


@pytest.mark.parametrize("state", list(JobState))
def test_delete_takes_up_to_limit_jobs_of_the_state(state: JobState) -> None:
    offered = [make_job(s, local_id=i) for i, s in enumerate([*JobState, *JobState])]
    matching = [job.local_id for job in offered if job.state is state]
    guard = int(state)
    assert decide_delete(offered, state, limit=1) == [Deleted(matching[0], guard)]
    assert decide_delete(offered, state, limit=5) == [Deleted(i, guard) for i in matching]
    assert decide_delete(offered, state, limit=0) == []


def test_an_unguarded_delete_names_no_state_for_a_cluster_of_an_older_format() -> None:
    offered = [make_job(FAILED, local_id=4)]
    assert decide_delete(offered, FAILED, limit=1, guarded=False) == [Deleted(4)]


def test_delete_refuses_a_negative_limit() -> None:
    refused = refusal(lambda: decide_delete([], PENDING, limit=-3))
    assert (refused.code, refused.message) == (
        RefusalCode.INVALID_ARGUMENT,
        "limit must not be negative, got -3",
    )


# --- What is decided applies ------------------------------------------------------------


def _applies(job: Job, event: JobEvent, at: int) -> bool:
    source = job.claim_source or WORKER
    return evolve(job, event, stamp(at, source), job.local_id)[1].applied


@given(job=jobs(), now=st.integers(0, 20_000))
def test_a_decided_claim_applies(job: Job, now: int) -> None:
    for event in decide_claims([job], "c", now, limit=1):
        assert _applies(job, event, now)


@given(job=jobs(IN_PROGRESS), now=st.integers(0, 20_000), timeout=st.integers(0, 10_000))
def test_a_decided_timeout_applies(job: Job, now: int, timeout: int) -> None:
    for event in decide_timeouts([job], now, timeout):
        assert _applies(job, event, now)


@given(job=jobs(), now=st.integers(0, 20_000), ttl=st.integers(0, 10_000))
def test_a_decided_collection_applies(job: Job, now: int, ttl: int) -> None:
    for event in decide_collect([job], now, ttl, ttl):
        assert _applies(job, event, now)


@given(job=jobs(), now=st.integers(0, 20_000))
def test_a_decided_retry_or_delete_applies(job: Job, now: int) -> None:
    events: list[JobEvent] = [
        *decide_retry([job], attempts=1, run_after=None, now=now, limit=1),
        *decide_delete([job], job.state, limit=1),
    ]
    for event in events:
        assert _applies(job, event, now)


def test_a_decided_ack_applies_to_the_claimed_job() -> None:
    job = make_job(IN_PROGRESS, touched_at=CLAIMED_AT)
    assert _applies(job, decide_success(job.local_id, "ok"), NOW)
    assert _applies(job, decide_failure(job.local_id, 10, "no"), NOW)
