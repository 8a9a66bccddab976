"""The job state machine: every (state, event) pair, then the PinLater behaviours users
rely on, one by one.

`evolve` never refuses: an event that does not apply comes back with a rejected verdict
and the job unchanged. Unless a test says otherwise, an IN_PROGRESS job is claimed by
WORKER under CLAIM and has two of its three attempts left (see factories.make_job).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.events import (
    Actor,
    Cancelled,
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
from pinledger.ledger.state import (
    APPLIED,
    MAX_CUSTOM_STATUS,
    TRANSITIONS,
    Job,
    JobState,
    Stamp,
    Verdict,
    cancelled_status,
    cap_status,
    event_local_id,
    evolve,
    is_cancelled,
)
from tests.unit.factories import (
    CLAIM,
    CLAIMED_AT,
    NOW,
    OTHER_CLAIM,
    OTHER_WORKER,
    WORKER,
    make_job,
    stamp,
)

PENDING = JobState.PENDING
IN_PROGRESS = JobState.IN_PROGRESS
SUCCEEDED = JobState.SUCCEEDED
FAILED = JobState.FAILED
LOCAL_ID = make_job().local_id


def applied(job: Job | None, event: JobEvent, at: int = NOW, source: str = WORKER) -> Job | None:
    """Evolve, asserting the event applies."""
    after, verdict = evolve(job, event, stamp(at, source), local_id=LOCAL_ID)
    assert verdict == APPLIED, verdict
    return after


def applied_job(job: Job | None, event: JobEvent, at: int = NOW, source: str = WORKER) -> Job:
    """Evolve, asserting the event applies and a job remains."""
    after = applied(job, event, at, source)
    assert after is not None
    return after


def rejected(job: Job | None, event: JobEvent, at: int = NOW, source: str = WORKER) -> str:
    """Evolve, asserting the event is rejected and the job unchanged; the reason."""
    after, verdict = evolve(job, event, stamp(at, source), local_id=LOCAL_ID)
    assert not verdict.applied
    assert after == job
    return verdict.reason


# --- Every (state, event) pair ----------------------------------------------------------

# For each event type, the event most likely to apply to the job make_job builds: acks
# from the claim's source, a timeout carrying exactly what the owner saw.
EVENTS: dict[type, JobEvent] = {
    Enqueued: Enqueued(body=b"new", priority=2, run_after=NOW, attempts_allowed=2),
    Claimed: Claimed(LOCAL_ID, OTHER_CLAIM),
    Succeeded: Succeeded(LOCAL_ID, append_status=" done"),
    Failed: Failed(LOCAL_ID, retry_delay_ms=1000),
    Checkpointed: Checkpointed(LOCAL_ID),
    TimedOut: TimedOut(LOCAL_ID, claim=CLAIM, touched_at=CLAIMED_AT),
    Retried: Retried(LOCAL_ID, attempts_allowed=3, run_after=NOW),
    Deleted: Deleted(LOCAL_ID),
    Collected: Collected(LOCAL_ID),
    Cancelled: Cancelled(LOCAL_ID, reason="wrong body"),
}
STATES: list[JobState | None] = [None, *JobState]


@dataclass(frozen=True)
class Becomes:
    state: JobState | None  # None: the job is removed


@dataclass(frozen=True)
class RejectedWith:
    words: str  # what the rejection reason says


EXPECTED: list[tuple[JobState | None, type, Becomes | RejectedWith]] = [
    (None, Enqueued, Becomes(PENDING)),
    (None, Claimed, RejectedWith("claim: no such job")),
    (None, Succeeded, RejectedWith("success ack: no such job")),
    (None, Failed, RejectedWith("failure ack: no such job")),
    (None, Checkpointed, RejectedWith("checkpoint: no such job")),
    (None, TimedOut, RejectedWith("timeout: no such job")),
    (None, Retried, RejectedWith("retry: no such job")),
    (None, Deleted, RejectedWith("delete: no such job")),
    (None, Collected, RejectedWith("gc: no such job")),
    (PENDING, Enqueued, RejectedWith("enqueue: a job with this id exists already")),
    (PENDING, Claimed, Becomes(IN_PROGRESS)),
    (PENDING, Succeeded, RejectedWith("success ack: job is PENDING, not IN_PROGRESS")),
    (PENDING, Failed, RejectedWith("failure ack: job is PENDING, not IN_PROGRESS")),
    (PENDING, Checkpointed, RejectedWith("checkpoint: job is PENDING, not IN_PROGRESS")),
    (PENDING, TimedOut, RejectedWith(f"timeout: claim {CLAIM} is no longer current")),
    (PENDING, Retried, RejectedWith("retry: job is PENDING, not FAILED")),
    (PENDING, Deleted, Becomes(None)),
    (PENDING, Collected, RejectedWith("gc: job is PENDING, not finished")),
    (IN_PROGRESS, Enqueued, RejectedWith("enqueue: a job with this id exists already")),
    (IN_PROGRESS, Claimed, RejectedWith(f"claim: job is already claimed by {CLAIM}")),
    (IN_PROGRESS, Succeeded, Becomes(SUCCEEDED)),
    (IN_PROGRESS, Failed, Becomes(PENDING)),
    (IN_PROGRESS, Checkpointed, Becomes(IN_PROGRESS)),
    (IN_PROGRESS, TimedOut, Becomes(PENDING)),
    (IN_PROGRESS, Retried, RejectedWith("retry: job is IN_PROGRESS, not FAILED")),
    (IN_PROGRESS, Deleted, Becomes(None)),
    (IN_PROGRESS, Collected, RejectedWith("gc: job is IN_PROGRESS, not finished")),
    (SUCCEEDED, Enqueued, RejectedWith("enqueue: a job with this id exists already")),
    (SUCCEEDED, Claimed, RejectedWith("claim: job is SUCCEEDED, not PENDING")),
    (SUCCEEDED, Succeeded, RejectedWith("success ack: job is SUCCEEDED, not IN_PROGRESS")),
    (SUCCEEDED, Failed, RejectedWith("failure ack: job is SUCCEEDED, not IN_PROGRESS")),
    (SUCCEEDED, Checkpointed, RejectedWith("checkpoint: job is SUCCEEDED, not IN_PROGRESS")),
    (SUCCEEDED, TimedOut, RejectedWith(f"timeout: claim {CLAIM} is no longer current")),
    (SUCCEEDED, Retried, RejectedWith("retry: job is SUCCEEDED, not FAILED")),
    (SUCCEEDED, Deleted, Becomes(None)),
    (SUCCEEDED, Collected, Becomes(None)),
    (FAILED, Enqueued, RejectedWith("enqueue: a job with this id exists already")),
    (FAILED, Claimed, RejectedWith("claim: job is FAILED, not PENDING")),
    (FAILED, Succeeded, RejectedWith("success ack: job is FAILED, not IN_PROGRESS")),
    (FAILED, Failed, RejectedWith("failure ack: job is FAILED, not IN_PROGRESS")),
    (FAILED, Checkpointed, RejectedWith("checkpoint: job is FAILED, not IN_PROGRESS")),
    (FAILED, TimedOut, RejectedWith(f"timeout: claim {CLAIM} is no longer current")),
    (FAILED, Retried, Becomes(PENDING)),
    (FAILED, Deleted, Becomes(None)),
    (FAILED, Collected, Becomes(None)),
    (None, Cancelled, RejectedWith("cancel: no such job")),
    (PENDING, Cancelled, Becomes(FAILED)),
    (IN_PROGRESS, Cancelled, Becomes(FAILED)),
    (SUCCEEDED, Cancelled, RejectedWith("cancel: job is SUCCEEDED, finished already")),
    (FAILED, Cancelled, RejectedWith("cancel: job is FAILED, finished already")),
]


def _job_in(state: JobState | None) -> Job | None:
    return None if state is None else make_job(state)


def _name(state: JobState | None) -> str:
    return "NONE" if state is None else state.name


def _state_of(job: Job | None) -> JobState | None:
    return None if job is None else job.state


@pytest.mark.parametrize(
    ("state", "event_type", "expected"),
    EXPECTED,
    ids=[f"{_name(state)}-{kind.__name__}" for state, kind, _ in EXPECTED],
)
def test_every_state_and_event_pair(
    state: JobState | None, event_type: type, expected: Becomes | RejectedWith
) -> None:
    job = _job_in(state)
    after, verdict = evolve(job, EVENTS[event_type], stamp(), local_id=LOCAL_ID)
    if isinstance(expected, Becomes):
        assert verdict == APPLIED
        assert _state_of(after) == expected.state
    else:
        assert not verdict.applied
        assert expected.words in verdict.reason
        assert after == job


def test_the_pair_table_lists_every_pair_once() -> None:
    pairs = [(state, kind) for state, kind, _ in EXPECTED]
    assert len(pairs) == len(set(pairs)) == len(STATES) * len(EVENTS)


def test_the_pairs_that_apply_are_exactly_the_transition_table_keys() -> None:
    applying = {(s, kind): e.state for s, kind, e in EXPECTED if isinstance(e, Becomes)}
    assert set(applying) == set(TRANSITIONS)
    for key, state in applying.items():
        assert state in TRANSITIONS[key]


# One example for every edge of the transition table.
EDGE_EXAMPLES: list[tuple[Job | None, JobEvent]] = [
    (None, EVENTS[Enqueued]),
    (make_job(PENDING), EVENTS[Claimed]),
    (make_job(PENDING), EVENTS[Deleted]),
    (make_job(IN_PROGRESS), EVENTS[Succeeded]),
    (make_job(IN_PROGRESS), EVENTS[Failed]),
    (make_job(IN_PROGRESS, attempts_remaining=1), EVENTS[Failed]),
    (make_job(IN_PROGRESS), Checkpointed(LOCAL_ID)),
    (make_job(IN_PROGRESS), Checkpointed(LOCAL_ID, move_to_pending=True)),
    (make_job(IN_PROGRESS), EVENTS[TimedOut]),
    (make_job(IN_PROGRESS, attempts_remaining=1), EVENTS[TimedOut]),
    (make_job(IN_PROGRESS), EVENTS[Deleted]),
    (make_job(SUCCEEDED), EVENTS[Deleted]),
    (make_job(SUCCEEDED), EVENTS[Collected]),
    (make_job(FAILED), EVENTS[Retried]),
    (make_job(FAILED), EVENTS[Deleted]),
    (make_job(FAILED), EVENTS[Collected]),
    (make_job(PENDING), EVENTS[Cancelled]),
    (make_job(IN_PROGRESS), EVENTS[Cancelled]),
]


def test_every_edge_of_the_transition_table_is_reachable() -> None:
    edges: set[tuple[JobState | None, type, JobState | None]] = set()
    for job, event in EDGE_EXAMPLES:
        after = applied(job, event)
        edges.add((_state_of(job), type(event), _state_of(after)))
    assert edges == {
        (state, kind, after) for (state, kind), targets in TRANSITIONS.items() for after in targets
    }


# --- Enqueue ----------------------------------------------------------------------------


def test_enqueue_creates_a_pending_job_with_every_attempt_left() -> None:
    event = Enqueued(
        body=b"hello", priority=2, run_after=NOW + 5, attempts_allowed=3, custom_status="new"
    )
    after = applied(None, event)
    assert after == Job(
        local_id=LOCAL_ID,
        priority=2,
        state=PENDING,
        body=b"hello",
        attempts_allowed=3,
        attempts_remaining=3,
        custom_status="new",
        created_at=NOW,
        run_after=NOW + 5,
        updated_at=NOW,
    )


def test_enqueue_truncates_a_long_custom_status() -> None:
    event = Enqueued(b"", 1, NOW, 1, custom_status="s" * (MAX_CUSTOM_STATUS + 1))
    assert applied_job(None, event).custom_status == "s" * MAX_CUSTOM_STATUS


def test_enqueue_with_negative_attempts_records_none_left() -> None:
    after = applied_job(None, Enqueued(b"", 1, NOW, attempts_allowed=-4))
    assert (after.attempts_allowed, after.attempts_remaining) == (0, 0)


def test_enqueue_needs_the_local_id_derived_from_the_offset() -> None:
    with pytest.raises(ValueError, match="needs the local_id"):
        evolve(None, EVENTS[Enqueued], stamp())


def test_enqueue_does_not_overwrite_an_existing_job() -> None:
    assert "exists already" in rejected(make_job(SUCCEEDED), EVENTS[Enqueued])


# --- Claim ------------------------------------------------------------------------------


def test_claim_moves_a_due_job_in_progress_under_the_callers_source() -> None:
    job = make_job(PENDING)
    after = applied_job(job, Claimed(LOCAL_ID, CLAIM), at=NOW, source=OTHER_WORKER)
    assert after == job._replace(
        state=IN_PROGRESS,
        claim=CLAIM,
        claim_source=OTHER_WORKER,
        touched_at=NOW,
        updated_at=NOW,
    )


def test_claim_does_not_use_an_attempt() -> None:
    after = applied_job(make_job(PENDING), Claimed(LOCAL_ID, CLAIM))
    assert (after.attempts_allowed, after.attempts_remaining) == (3, 2)


def test_claim_applies_exactly_at_run_after() -> None:
    job = make_job(PENDING, run_after=NOW)
    assert applied_job(job, Claimed(LOCAL_ID, CLAIM), at=NOW).state is IN_PROGRESS


def test_claim_before_run_after_is_rejected() -> None:
    job = make_job(PENDING, run_after=NOW + 1)
    assert rejected(job, Claimed(LOCAL_ID, CLAIM), at=NOW) == "claim: job is not due yet"


def test_second_claim_is_rejected_and_the_first_in_the_log_wins() -> None:
    first = applied_job(make_job(PENDING), Claimed(LOCAL_ID, CLAIM), source=WORKER)
    reason = rejected(first, Claimed(LOCAL_ID, OTHER_CLAIM), source=OTHER_WORKER)
    assert reason == f"claim: job is already claimed by {CLAIM}"
    assert (first.claim, first.claim_source) == (CLAIM, WORKER)


# --- Success ack ------------------------------------------------------------------------


def test_success_ack_finishes_the_job_and_appends_the_custom_status() -> None:
    job = make_job(IN_PROGRESS, custom_status="started;")
    after = applied_job(job, Succeeded(LOCAL_ID, append_status="done"), at=NOW)
    assert after == job._replace(
        state=SUCCEEDED,
        custom_status="started;done",
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=NOW,
    )


def test_success_ack_naming_the_current_claim_applies_from_any_source() -> None:
    event = Succeeded(LOCAL_ID, claim=CLAIM)
    assert applied_job(make_job(IN_PROGRESS), event, source=OTHER_WORKER).state is SUCCEEDED


def test_appended_custom_status_is_capped_at_5000_characters() -> None:
    job = make_job(IN_PROGRESS, custom_status="a" * 4990)
    after = applied_job(job, Succeeded(LOCAL_ID, append_status="b" * 20))
    assert after.custom_status == "a" * 4990 + "b" * 10
    assert cap_status("x" * 6000) == "x" * MAX_CUSTOM_STATUS


def test_success_ack_from_another_source_is_rejected_and_changes_nothing() -> None:
    reason = rejected(make_job(IN_PROGRESS), EVENTS[Succeeded], source=OTHER_WORKER)
    assert reason == (
        f"success ack: from {OTHER_WORKER!r}, but job is claimed by {WORKER!r} under {CLAIM}"
    )


def test_success_ack_naming_a_stale_claim_is_rejected_even_from_the_same_source() -> None:
    reason = rejected(make_job(IN_PROGRESS), Succeeded(LOCAL_ID, claim=OTHER_CLAIM))
    assert reason == f"success ack: stale claim {OTHER_CLAIM}, job is claimed by {CLAIM}"


# --- Failure ack ------------------------------------------------------------------------


def test_failure_ack_with_attempts_left_retries_after_the_delay() -> None:
    job = make_job(IN_PROGRESS, attempts_remaining=2, custom_status="try;")
    after = applied_job(job, Failed(LOCAL_ID, retry_delay_ms=5000, append_status="boom"), at=NOW)
    assert after == job._replace(
        state=PENDING,
        attempts_remaining=1,
        run_after=NOW + 5000,
        custom_status="try;boom",
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=NOW,
    )


def test_failure_ack_on_the_last_attempt_fails_the_job() -> None:
    job = make_job(IN_PROGRESS, attempts_remaining=1)
    after = applied_job(job, Failed(LOCAL_ID, retry_delay_ms=5000, append_status="!"))
    assert after == job._replace(
        state=FAILED,
        attempts_remaining=0,
        custom_status=job.custom_status + "!",
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=NOW,
    )


def test_failure_ack_with_a_negative_delay_retries_at_once() -> None:
    after = applied_job(make_job(IN_PROGRESS), Failed(LOCAL_ID, retry_delay_ms=-10), at=NOW)
    assert after.run_after == NOW


@pytest.mark.parametrize("state", [PENDING, SUCCEEDED, FAILED])
def test_failure_ack_for_a_job_not_in_progress_changes_nothing(state: JobState) -> None:
    assert "not IN_PROGRESS" in rejected(make_job(state), EVENTS[Failed])


def test_stale_failure_ack_from_another_source_is_rejected_and_changes_nothing() -> None:
    # The worker whose claim timed out must not overwrite the newer attempt.
    job = make_job(IN_PROGRESS, claim=OTHER_CLAIM, claim_source=OTHER_WORKER)
    reason = rejected(job, Failed(LOCAL_ID), source=WORKER)
    assert f"from {WORKER!r}, but job is claimed by {OTHER_WORKER!r}" in reason


def test_failure_ack_naming_a_stale_claim_is_rejected() -> None:
    reason = rejected(make_job(IN_PROGRESS), Failed(LOCAL_ID, claim=OTHER_CLAIM))
    assert reason == f"failure ack: stale claim {OTHER_CLAIM}, job is claimed by {CLAIM}"


# --- Checkpoint -------------------------------------------------------------------------


def test_checkpoint_heartbeat_renews_the_claim_and_keeps_it() -> None:
    job = make_job(IN_PROGRESS)
    after = applied_job(job, Checkpointed(LOCAL_ID), at=NOW)
    assert after == job._replace(touched_at=NOW, updated_at=NOW)


def test_checkpoint_replaces_the_body() -> None:
    after = applied_job(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID, new_body=b"step 2"))
    assert after.body == b"step 2"


def test_checkpoint_with_an_empty_new_body_empties_it() -> None:
    assert applied_job(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID, new_body=b"")).body == b""


def test_checkpoint_resets_attempts() -> None:
    job = make_job(IN_PROGRESS, attempts_allowed=3, attempts_remaining=1)
    after = applied_job(job, Checkpointed(LOCAL_ID, attempts_allowed=5))
    assert (after.attempts_allowed, after.attempts_remaining) == (5, 5)


def test_checkpoint_with_negative_attempts_leaves_none() -> None:
    after = applied_job(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID, attempts_allowed=-1))
    assert (after.attempts_allowed, after.attempts_remaining) == (0, 0)


def test_checkpoint_prepends_the_custom_status() -> None:
    job = make_job(IN_PROGRESS, custom_status="old")
    after = applied_job(job, Checkpointed(LOCAL_ID, prepend_status="new;"))
    assert after.custom_status == "new;old"


def test_checkpoint_prepended_status_is_capped_keeping_the_new_text() -> None:
    job = make_job(IN_PROGRESS, custom_status="old")
    after = applied_job(job, Checkpointed(LOCAL_ID, prepend_status="n" * 4998))
    assert after.custom_status == "n" * 4998 + "ol"


@pytest.mark.parametrize("prepend", [None, ""])
def test_checkpoint_without_prepend_status_keeps_the_custom_status(prepend: str | None) -> None:
    after = applied_job(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID, prepend_status=prepend))
    assert after.custom_status == make_job().custom_status


def test_checkpoint_move_to_pending_runs_again_now_without_using_an_attempt() -> None:
    job = make_job(IN_PROGRESS, attempts_remaining=2)
    after = applied_job(job, Checkpointed(LOCAL_ID, move_to_pending=True), at=NOW)
    assert after == job._replace(
        state=PENDING,
        run_after=NOW,
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=NOW,
    )


def test_checkpoint_move_to_pending_with_run_after_schedules_the_next_run() -> None:
    event = Checkpointed(
        LOCAL_ID,
        move_to_pending=True,
        run_after=NOW + 60_000,
        new_body=b"next",
        attempts_allowed=4,
        prepend_status="run 2;",
    )
    after = applied_job(make_job(IN_PROGRESS, custom_status="run 1"), event)
    assert (after.state, after.run_after, after.body) == (PENDING, NOW + 60_000, b"next")
    assert (after.attempts_allowed, after.attempts_remaining) == (4, 4)
    assert after.custom_status == "run 2;run 1"


def test_checkpoint_from_a_stale_claim_changes_nothing() -> None:
    reason = rejected(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID, claim=OTHER_CLAIM))
    assert reason == f"checkpoint: stale claim {OTHER_CLAIM}, job is claimed by {CLAIM}"


def test_checkpoint_from_another_source_changes_nothing() -> None:
    reason = rejected(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID), source=OTHER_WORKER)
    assert reason.startswith(f"checkpoint: from {OTHER_WORKER!r}")


def test_a_repeated_heartbeat_applies_again_and_prepends_its_status_twice() -> None:
    # The one event whose duplicate is not a no-op: the job stays IN_PROGRESS under the
    # same claim, so the fence lets it through again (PinLater did the same).
    event = Checkpointed(LOCAL_ID, prepend_status="beat;")
    once = applied_job(make_job(IN_PROGRESS, custom_status=""), event)
    twice = applied_job(once, event)
    assert (once.custom_status, twice.custom_status) == ("beat;", "beat;beat;")
    assert twice._replace(custom_status="") == once._replace(custom_status="")


def test_a_repeated_failure_ack_is_rejected_because_the_job_left_in_progress() -> None:
    once = applied_job(make_job(IN_PROGRESS), Failed(LOCAL_ID, retry_delay_ms=10))
    assert rejected(once, Failed(LOCAL_ID, retry_delay_ms=10)).endswith("not IN_PROGRESS")


# --- Claim timeout ----------------------------------------------------------------------


def test_timeout_with_attempts_left_makes_the_job_due_at_once() -> None:
    job = make_job(IN_PROGRESS, attempts_remaining=2)
    after = applied_job(job, TimedOut(LOCAL_ID, CLAIM, CLAIMED_AT), at=NOW)
    assert after == job._replace(
        state=PENDING,
        attempts_remaining=1,
        run_after=NOW,
        claim=None,
        claim_source=None,
        touched_at=None,
        updated_at=NOW,
    )


def test_timeout_on_the_last_attempt_fails_the_job() -> None:
    job = make_job(IN_PROGRESS, attempts_remaining=1)
    after = applied_job(job, TimedOut(LOCAL_ID, CLAIM, CLAIMED_AT))
    assert (after.state, after.attempts_remaining, after.claim) == (FAILED, 0, None)


def test_timeout_overtaken_by_a_heartbeat_is_rejected() -> None:
    renewed = applied_job(make_job(IN_PROGRESS), Checkpointed(LOCAL_ID), at=NOW - 10)
    reason = rejected(renewed, TimedOut(LOCAL_ID, CLAIM, touched_at=CLAIMED_AT), at=NOW)
    assert reason == "timeout: a heartbeat renewed the claim"


def test_timeout_of_an_older_claim_is_rejected() -> None:
    job = make_job(IN_PROGRESS, claim=OTHER_CLAIM)
    reason = rejected(job, TimedOut(LOCAL_ID, CLAIM, CLAIMED_AT))
    assert reason == f"timeout: claim {CLAIM} is no longer current"


def test_timeout_after_the_ack_is_rejected() -> None:
    done = applied_job(make_job(IN_PROGRESS), Succeeded(LOCAL_ID))
    assert "no longer current" in rejected(done, TimedOut(LOCAL_ID, CLAIM, CLAIMED_AT))


# --- Operator actions and garbage collection --------------------------------------------


def test_retry_moves_a_failed_job_back_to_pending_with_fresh_attempts() -> None:
    job = make_job(FAILED, custom_status="gave up")
    after = applied_job(job, Retried(LOCAL_ID, attempts_allowed=4, run_after=NOW + 9), at=NOW)
    assert after == job._replace(
        state=PENDING,
        attempts_allowed=4,
        attempts_remaining=4,
        run_after=NOW + 9,
        updated_at=NOW,
    )


def test_retry_with_negative_attempts_leaves_none() -> None:
    after = applied_job(make_job(FAILED), Retried(LOCAL_ID, attempts_allowed=-2, run_after=NOW))
    assert (after.attempts_allowed, after.attempts_remaining) == (0, 0)


@pytest.mark.parametrize("state", [PENDING, IN_PROGRESS, SUCCEEDED])
def test_retry_applies_only_to_failed_jobs(state: JobState) -> None:
    assert rejected(make_job(state), EVENTS[Retried]).endswith("not FAILED")


@pytest.mark.parametrize("state", list(JobState))
def test_delete_removes_a_job_in_any_state(state: JobState) -> None:
    assert applied(make_job(state), Deleted(LOCAL_ID)) is None


@pytest.mark.parametrize("state", list(JobState))
def test_a_guarded_delete_removes_a_job_still_in_the_state_it_was_selected_in(
    state: JobState,
) -> None:
    assert applied(make_job(state), Deleted(LOCAL_ID, int(state))) is None


@pytest.mark.parametrize(
    ("selected", "now"), [(s, n) for s in JobState for n in JobState if s is not n]
)
def test_a_guarded_delete_leaves_a_job_that_changed_state_since_it_was_selected(
    selected: JobState, now: JobState
) -> None:
    # deleteJobs(FAILED) racing a retry must not delete the job that is PENDING now.
    assert rejected(make_job(now), Deleted(LOCAL_ID, int(selected))) == (
        f"delete: job is {now.name}, not {selected.name} as selected"
    )


@pytest.mark.parametrize("state", [SUCCEEDED, FAILED])
def test_gc_removes_finished_jobs(state: JobState) -> None:
    assert applied(make_job(state), Collected(LOCAL_ID)) is None


@pytest.mark.parametrize("state", [PENDING, IN_PROGRESS])
def test_gc_leaves_unfinished_jobs(state: JobState) -> None:
    assert rejected(make_job(state), Collected(LOCAL_ID)).endswith("not finished")


# --- Small helpers ----------------------------------------------------------------------


def test_event_local_id_of_enqueued_comes_from_the_records_position() -> None:
    assert event_local_id(EVENTS[Enqueued], offset=12, index=3) == 12_003


def test_event_local_id_of_other_events_is_the_one_they_name() -> None:
    assert event_local_id(Deleted(local_id=55), offset=12, index=3) == 55


def test_verdicts_read_as_applied_or_rejected_with_the_reason() -> None:
    assert str(APPLIED) == "applied"
    assert str(Verdict(False, "gc: no such job")) == "rejected: gc: no such job"


# --- Cancelled (decision 0036) ---------------------------------------------------------


@given(
    state=st.sampled_from([PENDING, IN_PROGRESS]),
    old=st.text(max_size=6000),
    reason=st.text(max_size=6000),
    source=st.text(max_size=50),
)
def test_a_cancel_ends_an_unfinished_job_failed_for_good_saying_who(
    state: JobState, old: str, reason: str, source: str
) -> None:
    job = make_job(state, custom_status=old)
    after, verdict = evolve(job, Cancelled(LOCAL_ID, reason), Stamp(NOW, Actor(source=source)))
    assert verdict == APPLIED
    assert after is not None
    assert (after.state, after.attempts_remaining) == (FAILED, 0)
    assert (after.claim, after.claim_source, after.touched_at) == (None, None, None)
    assert after.body == job.body and after.attempts_allowed == job.attempts_allowed
    said = cancelled_status(source, reason)
    assert len(after.custom_status) <= MAX_CUSTOM_STATUS
    assert after.custom_status == (said + ("; " + old if old else ""))[:MAX_CUSTOM_STATUS]
    assert is_cancelled(after)


@given(state=st.sampled_from([SUCCEEDED, FAILED]), reason=st.text(max_size=20))
def test_a_cancel_of_a_finished_job_changes_nothing(state: JobState, reason: str) -> None:
    job = make_job(state)
    after, verdict = evolve(job, Cancelled(LOCAL_ID, reason), stamp())
    assert not verdict.applied and "finished already" in verdict.reason
    assert after == job
