"""Job histories from timeline rows: steps, attempts and their latency breakdown."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from hypothesis import given, settings

from pinledger.ledger.codec import tag_of
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import (
    Actor,
    Checkpointed,
    Claimed,
    Deleted,
    Enqueued,
    Failed,
    JobEvent,
    Retried,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.state import Job, JobState, Stamp, evolve
from pinledger.projections.history import (
    Outcome,
    StatusChange,
    build_history,
    event_from_row,
    to_json,
)
from pinledger.projections.pg.store import EventRow
from pinledger.projections.timeline_rows import _detail
from pinledger.service.api.history import from_thrift, to_thrift
from tests.unit.strategies import histories

T0 = 1_700_000_000_000
LOCAL_ID = 5000
D = JobDescriptor("mail", 0, 1, LOCAL_ID)
W1 = "worker:host-1"
W2 = "worker:host-2"
OWNER = "pinledger:owner"


def rows_for(
    steps: Sequence[tuple[int, str, JobEvent]], local_id: int = LOCAL_ID
) -> list[EventRow]:
    """What the projector records for these (time, source, event) steps, one record each."""
    job: Job | None = None
    rows = []
    for offset, (at, source, event) in enumerate(steps, start=local_id // 1000):
        prior = job
        job, verdict = evolve(job, event, Stamp(at, Actor(source, f"r{offset}", "s1")), local_id)
        rows.append(
            EventRow(
                local_id=local_id,
                offset=offset,
                idx=0,
                type=tag_of(event),
                at=at,
                source=source,
                request_id=f"r{offset}",
                server="s1",
                claim=getattr(event, "claim", None) or (prior.claim if prior else None),
                applied=verdict.applied,
                verdict=str(verdict),
                state_after=None if job is None else int(job.state),
                attempts_remaining_after=None if job is None else job.attempts_remaining,
                detail=_detail(event),
                traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01" if offset == 5 else None,
            )
        )
    return rows


# The story: failure with a retry delay, a claim timeout, a stale ack from the
# timed-out worker, then success.
STORY: list[tuple[int, str, JobEvent]] = [
    (T0, "client:app", Enqueued(b"hello", 1, T0 + 100, 3, "new")),
    (T0 + 150, W1, Claimed(LOCAL_ID, "c1")),
    (T0 + 400, W1, Failed(LOCAL_ID, 1000, "boom")),
    (T0 + 1500, W2, Claimed(LOCAL_ID, "c2")),
    (T0 + 5500, OWNER, TimedOut(LOCAL_ID, "c2", T0 + 1500)),
    (T0 + 5600, W3 := "worker:host-3", Claimed(LOCAL_ID, "c3")),
    (T0 + 5700, W2, Succeeded(LOCAL_ID, "late")),
    (T0 + 6000, W3, Succeeded(LOCAL_ID, "ok")),
]


def test_story_steps_carry_actor_claim_attempt_and_verdict() -> None:
    history = build_history(D, rows_for(STORY))
    got = [
        (s.action, s.source, s.claim, s.attempt, s.state_after, s.applied) for s in history.steps
    ]
    assert got == [
        ("Enqueued", "client:app", None, 0, JobState.PENDING, True),
        ("Claimed", W1, "c1", 1, JobState.IN_PROGRESS, True),
        ("Failed", W1, "c1", 1, JobState.PENDING, True),
        ("Claimed", W2, "c2", 2, JobState.IN_PROGRESS, True),
        ("TimedOut", OWNER, "c2", 2, JobState.PENDING, True),
        ("Claimed", W3, "c3", 3, JobState.IN_PROGRESS, True),
        # The stale ack belongs to the attempt its worker had claimed.
        ("Succeeded", W2, "c3", 2, JobState.IN_PROGRESS, False),
        ("Succeeded", W3, "c3", 3, JobState.SUCCEEDED, True),
    ]
    stale = history.steps[6]
    assert "claimed by 'worker:host-3'" in stale.reason
    assert not stale.reason.startswith("rejected")
    assert history.steps[0].status_change == StatusChange("set", "new")
    assert history.steps[2].status_change == StatusChange("append", "boom")
    assert history.steps[2].attempts_remaining_after == 2
    assert history.steps[0].traceparent is not None
    assert history.descriptor == "mail:s0:p1:5000"


def test_story_attempts_and_latency_breakdown() -> None:
    history = build_history(D, rows_for(STORY))
    got = [
        (
            a.number,
            a.claim,
            a.outcome,
            a.queued_ms,
            a.running_ms,
            a.retry_delay_ms,
            a.timeout_lost_ms,
        )
        for a in history.attempts
    ]
    assert got == [
        (1, "c1", Outcome.FAILED, 50, 250, 1000, 0),
        (2, "c2", Outcome.TIMED_OUT, 100, 4000, 0, 4000),
        (3, "c3", Outcome.SUCCEEDED, 100, 400, None, 0),
    ]
    assert history.initial_delay_ms == 100
    assert history.enqueued_at == T0
    assert history.finished_at == T0 + 6000
    total = history.initial_delay_ms + sum(
        a.queued_ms + (a.running_ms or 0) + (a.retry_delay_ms or 0) for a in history.attempts
    )
    assert total == history.finished_at - T0


def test_snapshot_is_the_state_machines_job() -> None:
    history = build_history(D, rows_for(STORY))
    assert history.job is not None
    assert history.job.state is JobState.SUCCEEDED
    assert history.job.custom_status == "newboomok"
    assert history.job.attempts_remaining == 1
    assert history.job.body_bytes == 5


@pytest.mark.parametrize(
    ("at_offset", "state", "attempts", "last_outcome"),
    [
        (5, JobState.PENDING, 0, None),
        (6, JobState.IN_PROGRESS, 1, Outcome.RUNNING),
        (7, JobState.PENDING, 1, Outcome.FAILED),
        (8, JobState.IN_PROGRESS, 2, Outcome.RUNNING),
        (9, JobState.PENDING, 2, Outcome.TIMED_OUT),
        (11, JobState.IN_PROGRESS, 3, Outcome.RUNNING),
        (12, JobState.SUCCEEDED, 3, Outcome.SUCCEEDED),
        (99, JobState.SUCCEEDED, 3, Outcome.SUCCEEDED),
    ],
)
def test_at_offset_is_the_job_as_of_that_step(
    at_offset: int, state: JobState, attempts: int, last_outcome: Outcome | None
) -> None:
    history = build_history(D, rows_for(STORY), at_offset=at_offset)
    assert history.job is not None
    assert history.job.state is state
    assert len(history.attempts) == attempts
    assert all(s.offset <= at_offset for s in history.steps)
    if last_outcome is not None:
        assert history.attempts[-1].outcome is last_outcome


def test_before_the_enqueue_there_is_no_job() -> None:
    history = build_history(D, rows_for(STORY), at_offset=4)
    assert history.steps == () and history.job is None and history.attempts == ()


def test_running_attempt_has_no_end() -> None:
    history = build_history(D, rows_for(STORY[:2]))
    (attempt,) = history.attempts
    assert attempt.outcome is Outcome.RUNNING
    assert attempt.ended_at is None and attempt.running_ms is None
    assert history.finished_at is None


@pytest.mark.parametrize(
    ("tail", "outcome", "retry_delay", "state"),
    [
        # Move to pending with a run_after: released, the delay is the checkpoint's.
        (
            Checkpointed(LOCAL_ID, move_to_pending=True, run_after=T0 + 1200, prepend_status="p:"),
            Outcome.RELEASED,
            1000,
            JobState.PENDING,
        ),
        # Last attempt failing: FAILED, no retry scheduled.
        (Failed(LOCAL_ID, 500), Outcome.FAILED, None, JobState.FAILED),
        (Deleted(LOCAL_ID), Outcome.DELETED, None, None),
    ],
)
def test_how_an_attempt_ends(
    tail: JobEvent, outcome: Outcome, retry_delay: int | None, state: JobState | None
) -> None:
    steps: list[tuple[int, str, JobEvent]] = [
        (T0, "client:app", Enqueued(b"", 1, T0, 1)),
        (T0 + 100, W1, Claimed(LOCAL_ID, "c1")),
        (T0 + 200, W1, tail),
    ]
    history = build_history(D, rows_for(steps))
    (attempt,) = history.attempts
    assert attempt.outcome is outcome
    assert attempt.retry_delay_ms == retry_delay
    assert history.steps[-1].state_after == state
    if isinstance(tail, Checkpointed):
        assert history.steps[-1].status_change == StatusChange("prepend", "p:")


def test_operator_retry_makes_the_job_due_again() -> None:
    steps: list[tuple[int, str, JobEvent]] = [
        (T0, "client:app", Enqueued(b"", 1, T0, 1)),
        (T0 + 100, W1, Claimed(LOCAL_ID, "c1")),
        (T0 + 200, W1, Failed(LOCAL_ID, 0)),
        (T0 + 10_000, "ops:cli", Retried(LOCAL_ID, 2, T0 + 10_000)),
        (T0 + 10_300, W1, Claimed(LOCAL_ID, "c2")),
    ]
    history = build_history(D, rows_for(steps))
    assert [a.queued_ms for a in history.attempts] == [100, 300]
    assert history.attempts[1].due_at == T0 + 10_000


def test_stale_ack_naming_an_old_claim_belongs_to_that_attempt() -> None:
    steps: list[tuple[int, str, JobEvent]] = [
        *STORY[:4],
        (T0 + 1600, W1, Failed(LOCAL_ID, 0, "", claim="c1")),
    ]
    history = build_history(D, rows_for(steps))
    assert history.steps[-1].attempt == 1
    assert not history.steps[-1].applied
    assert "stale claim c1" in history.steps[-1].reason


def test_json_is_plain() -> None:
    data = to_json(build_history(D, rows_for(STORY)))
    assert data["steps"][1]["state_after"] == "IN_PROGRESS"
    assert data["attempts"][1]["outcome"] == "timed out"
    assert data["job"]["state"] == "SUCCEEDED"
    assert data["finished_at"] == T0 + 6000


@settings(max_examples=150, deadline=None)
@given(histories(max_steps=30))
def test_snapshot_matches_the_state_machine_for_any_history(steps: list) -> None:  # type: ignore[type-arg]
    """For every job of a realistic history, the history's snapshot is the job `evolve`
    produced (bar the body), and attempts are the applied claims."""
    by_job: dict[int, list[tuple[int, str, JobEvent]]] = {}
    jobs: dict[int, Job | None] = {}
    for step in steps:
        by_job.setdefault(step.local_id, []).append(
            (step.stamp.at, step.stamp.actor.source, step.event)
        )
        jobs[step.local_id], _ = evolve(
            jobs.get(step.local_id), step.event, step.stamp, step.local_id
        )
    for local_id, job_steps in by_job.items():
        rows = rows_for(job_steps, local_id)
        history = build_history(JobDescriptor("q", 0, 1, local_id), rows)
        expected = jobs[local_id]
        if expected is None:
            assert history.job is None
        else:
            assert history.job is not None
            want = expected._replace(body=b"")
            got = dataclasses.asdict(history.job)
            got.pop("body_bytes")
            assert got == {k: v for k, v in want._asdict().items() if k not in ("body", "local_id")}
            assert history.job.body_bytes == len(expected.body)
        claims = sum(1 for r in rows if r.type == tag_of(Claimed(0, "")) and r.applied)
        assert len(history.attempts) == claims
        assert [s.offset for s in history.steps] == sorted(s.offset for s in history.steps)
        for row in rows:
            assert event_from_row(row) is not None


def test_the_wire_form_rebuilds_the_same_history() -> None:
    """getJobHistory's struct carries every row field: the client's rebuild is equal."""
    history = build_history(D, rows_for(STORY))
    wire = to_thrift(history)
    assert from_thrift(D, wire) == history
    assert [a.outcome for a in wire.attempts] == ["failed", "timed out", "succeeded"]
    assert wire.steps[6].reason == history.steps[6].reason and not wire.steps[6].applied
    assert wire.job.jobState == JobState.SUCCEEDED and wire.job.customStatus == "newboomok"
