"""Properties of folding a partition's log through `evolve`: replay is deterministic and
can resume anywhere, invariants hold after every event, every applied change is an
edge of the transition table, and a duplicated event changes nothing (except for the
one documented case, a heartbeat's prepended status)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.ledger.events import Checkpointed
from pinledger.ledger.state import TRANSITIONS, Job, JobState, Verdict, cap_status, evolve
from tests.unit.strategies import Step, histories

Jobs = dict[int, Job]


def fold(
    steps: Iterable[Step], start: Mapping[int, Job] | None = None
) -> tuple[Jobs, list[Verdict]]:
    """Apply events in log order to a partition's jobs, as the projections do."""
    jobs = dict(start or {})
    verdicts: list[Verdict] = []
    for step in steps:
        job, verdict = evolve(jobs.get(step.local_id), step.event, step.stamp, step.local_id)
        _store(jobs, step.local_id, job)
        verdicts.append(verdict)
    return jobs, verdicts


def _store(jobs: Jobs, local_id: int, job: Job | None) -> None:
    if job is None:
        jobs.pop(local_id, None)
    else:
        jobs[local_id] = job


def _state_of(job: Job | None) -> JobState | None:
    return None if job is None else job.state


def assert_invariants(job: Job) -> None:
    assert 0 <= job.attempts_remaining <= job.attempts_allowed
    in_progress = job.state is JobState.IN_PROGRESS
    assert (job.claim is not None) == in_progress
    assert (job.claim_source is not None) == in_progress
    assert (job.touched_at is not None) == in_progress
    assert len(job.custom_status) <= 5000


@given(histories(), st.data())
def test_folding_a_prefix_then_the_rest_equals_folding_everything(
    history: list[Step], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(history)), label="cut")
    head, head_verdicts = fold(history[:cut])
    resumed, rest_verdicts = fold(history[cut:], start=head)
    everything, verdicts = fold(history)
    assert resumed == everything
    assert head_verdicts + rest_verdicts == verdicts


@given(histories())
def test_replay_is_deterministic(history: list[Step]) -> None:
    assert fold(history) == fold(history)


@given(histories())
def test_invariants_hold_after_every_event(history: list[Step]) -> None:
    jobs: Jobs = {}
    for step in history:
        job, _ = evolve(jobs.get(step.local_id), step.event, step.stamp, step.local_id)
        _store(jobs, step.local_id, job)
        if job is not None:
            assert_invariants(job)
            assert job.local_id == step.local_id


@given(histories())
def test_applied_events_follow_the_transition_table_and_rejected_ones_change_nothing(
    history: list[Step],
) -> None:
    jobs: Jobs = {}
    for step in history:
        before = jobs.get(step.local_id)
        after, verdict = evolve(before, step.event, step.stamp, step.local_id)
        if verdict.applied:
            key = (_state_of(before), type(step.event))
            assert key in TRANSITIONS
            assert _state_of(after) in TRANSITIONS[key]
        else:
            assert after == before
            assert verdict.reason
        _store(jobs, step.local_id, after)


def _is_heartbeat(step: Step) -> bool:
    return isinstance(step.event, Checkpointed) and not step.event.move_to_pending


@given(histories())
def test_an_event_delivered_twice_in_a_row_changes_nothing_the_second_time(
    history: list[Step],
) -> None:
    """Claimed, Succeeded, Failed, TimedOut, Retried, Deleted, Collected, Enqueued (at the
    same id) and Checkpointed(move_to_pending) all move the job out of the state they
    need, so their duplicate is rejected. A heartbeat keeps the job IN_PROGRESS under the
    same claim, so its duplicate applies again: with the same stamp that changes nothing
    but a prepended custom status, which is prepended a second time."""
    jobs: Jobs = {}
    for step in history:
        once, first = evolve(jobs.get(step.local_id), step.event, step.stamp, step.local_id)
        twice, second = evolve(once, step.event, step.stamp, step.local_id)
        if twice is not None:
            assert_invariants(twice)
        if first.applied and _is_heartbeat(step):
            assert isinstance(step.event, Checkpointed)
            assert once is not None
            assert second.applied
            prepend = step.event.prepend_status or ""
            assert twice == once._replace(custom_status=cap_status(prepend + once.custom_status))
        else:
            assert twice == once
            assert not second.applied
        _store(jobs, step.local_id, once)


def test_generated_histories_mostly_exercise_transitions_rather_than_rejections() -> None:
    """Guards the generator: if most events were rejected, the properties above would
    hold vacuously."""
    verdicts: Counter[bool] = Counter()
    edges: set[tuple[JobState | None, type, JobState | None]] = set()

    @settings(max_examples=150, derandomize=True, database=None)
    @given(histories())
    def collect(history: list[Step]) -> None:
        jobs: Jobs = {}
        for step in history:
            before = jobs.get(step.local_id)
            after, verdict = evolve(before, step.event, step.stamp, step.local_id)
            verdicts[verdict.applied] += 1
            if verdict.applied:
                edges.add((_state_of(before), type(step.event), _state_of(after)))
            _store(jobs, step.local_id, after)

    collect()
    total = verdicts[True] + verdicts[False]
    assert total > 1000
    assert verdicts[True] / total > 0.4, verdicts
    table = {(b, kind, a) for (b, kind), targets in TRANSITIONS.items() for a in targets}
    assert edges == table, table - edges
