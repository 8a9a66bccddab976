"""Ledger metrics: counters and histograms derived from the transitions the owner's
projection applied (never re-deciding a transition)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pinledger.ledger.events import (
    Actor,
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
from pinledger.ledger.state import Job, Stamp, evolve
from pinledger.projections.projector import Transition
from pinledger.service.observability.ledger_metrics import (
    JOBS,
    QUEUE_WAIT,
    REJECTED,
    RUN,
    LedgerMetrics,
    outcomes,
)
from pinledger.service.observability.metrics import Metrics

T0 = 1_700_000_000_000
ID = 7000
W1, W2, W3, OWNER = "worker:1", "worker:2", "worker:3", "pinledger:owner"


def transitions(
    steps: Sequence[tuple[int, str, JobEvent]], job: Job | None = None
) -> list[Transition]:
    """What the projection tells observers for these (time, source, event) steps."""
    found = []
    for at, source, event in steps:
        after, verdict = evolve(job, event, Stamp(at, Actor(source, "r", "s1")), ID)
        found.append(Transition(ID, event, job, after, verdict, at, None))
        job = after
    return found


# Enqueue (due at +100), failure with attempts left, a claim timeout, a stale ack from
# the timed-out worker, then success.
STORY: list[tuple[int, str, JobEvent]] = [
    (T0, "app", Enqueued(b"x", 1, T0 + 100, 3, "")),
    (T0 + 150, W1, Claimed(ID, "c1")),
    (T0 + 400, W1, Failed(ID, 1000, "")),
    (T0 + 1500, W2, Claimed(ID, "c2")),
    (T0 + 5500, OWNER, TimedOut(ID, "c2", T0 + 1500)),
    (T0 + 5600, W3, Claimed(ID, "c3")),
    (T0 + 5700, W2, Succeeded(ID, "late")),
    (T0 + 6000, W3, Succeeded(ID, "ok")),
]


def _histogram(metrics: Metrics, name: str, labels: str) -> tuple[int, float]:
    """(count, sum) of one histogram series, read from the Prometheus text."""
    lines = dict(
        line.rsplit(" ", 1) for line in metrics.prometheus().splitlines() if line[0] != "#"
    )
    return int(lines.get(f"{name}_count{{{labels}}}", 0)), float(
        lines.get(f"{name}_sum{{{labels}}}", 0)
    )


def _observed(steps: Sequence[tuple[int, str, JobEvent]]) -> Metrics:
    metrics = Metrics()
    LedgerMetrics(metrics).observe("mail", 0, transitions(steps))
    return metrics


def test_the_story_counts_what_the_ledger_applied() -> None:
    metrics = _observed(STORY)

    def jobs(outcome: str) -> float:
        return metrics.snapshot_counter(JOBS, queue="mail", outcome=outcome)

    assert jobs("enqueued") == 1
    assert jobs("claimed") == 3
    assert jobs("retried") == 2  # the failure ack and the timeout, both with attempts left
    assert jobs("timed_out") == 1
    assert jobs("succeeded") == 1
    assert jobs("failed") == 0
    assert metrics.snapshot_counter(REJECTED, queue="mail", action="Succeeded") == 1


def test_queue_wait_runs_from_due_to_claim() -> None:
    # Due at +100, claimed at +150; due again at +1400 (retry delay), claimed at +1500;
    # due at +5500 (timeout), claimed at +5600.
    count, total = _histogram(_observed(STORY), QUEUE_WAIT, 'queue="mail"')
    assert count == 3
    assert total == pytest.approx(0.05 + 0.1 + 0.1)


def test_run_time_runs_from_claim_to_the_end_of_the_attempt() -> None:
    metrics = _observed(STORY)
    assert _histogram(metrics, RUN, 'outcome="retried",queue="mail"') == pytest.approx((1, 0.25))
    assert _histogram(metrics, RUN, 'outcome="timed_out",queue="mail"') == pytest.approx((1, 4.0))
    assert _histogram(metrics, RUN, 'outcome="succeeded",queue="mail"') == pytest.approx((1, 0.4))


def test_the_last_attempt_failing_counts_as_failed() -> None:
    steps: list[tuple[int, str, JobEvent]] = [
        (T0, "app", Enqueued(b"x", 1, T0, 1, "")),
        (T0 + 10, W1, Claimed(ID, "c1")),
        (T0 + 30, W1, Failed(ID, 0, "")),
        (T0 + 40, "ops", Retried(ID, 1, T0 + 40)),
        (T0 + 50, W1, Claimed(ID, "c2")),
        (T0 + 2050, OWNER, TimedOut(ID, "c2", T0 + 50)),
        (T0 + 3000, OWNER, Collected(ID)),
    ]
    metrics = _observed(steps)
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="failed") == 2
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="retried") == 1
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="collected") == 1
    assert _histogram(metrics, RUN, 'outcome="failed",queue="mail"') == pytest.approx((1, 0.02))


def test_checkpoints_heartbeat_or_release() -> None:
    steps: list[tuple[int, str, JobEvent]] = [
        (T0, "app", Enqueued(b"x", 1, T0, 2, "")),
        (T0 + 10, W1, Claimed(ID, "c1")),
        (T0 + 20, W1, Checkpointed(ID)),
        (T0 + 30, W1, Checkpointed(ID, move_to_pending=True, run_after=T0 + 100)),
        (T0 + 200, W1, Claimed(ID, "c2")),
        (T0 + 210, "ops", Deleted(ID)),
    ]
    metrics = _observed(steps)
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="checkpointed") == 1
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="released") == 1
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="deleted") == 1
    assert _histogram(metrics, RUN, 'outcome="released",queue="mail"') == pytest.approx((1, 0.02))
    assert _histogram(metrics, RUN, 'outcome="deleted",queue="mail"') == pytest.approx((1, 0.01))


def test_an_attempt_claimed_before_the_takeover_has_no_run_time() -> None:
    """The claim was applied by the previous owner: its time is unknown here."""
    story = transitions(STORY[:2])
    metrics = Metrics()
    later = LedgerMetrics(metrics)
    later.observe("mail", 0, transitions([(T0 + 300, W1, Succeeded(ID, ""))], story[-1].after))
    assert metrics.snapshot_counter(JOBS, queue="mail", outcome="succeeded") == 1
    assert _histogram(metrics, RUN, 'outcome="succeeded",queue="mail"') == (0, 0.0)


def test_forget_drops_the_claim_times_of_a_partition() -> None:
    metrics = Metrics()
    ledger = LedgerMetrics(metrics)
    steps = transitions(STORY[:3])
    ledger.observe("mail", 0, steps[:2])
    ledger.forget("mail", 0)
    ledger.observe("mail", 0, steps[2:])
    assert _histogram(metrics, RUN, 'outcome="retried",queue="mail"') == (0, 0.0)


def test_rejected_events_count_only_as_rejections() -> None:
    (rejected,) = transitions([(T0, W1, Succeeded(ID, ""))])  # no such job
    assert not rejected.verdict.applied
    assert outcomes(rejected) == []
    metrics = Metrics()
    LedgerMetrics(metrics).observe("mail", 0, [rejected])
    assert metrics.snapshot_counter(REJECTED, queue="mail", action="Succeeded") == 1
    assert "pinledger_ledger_jobs_total" not in metrics.prometheus()
