"""Hypothesis strategies for events, envelopes, jobs and whole job histories.

Two kinds live here. The wire strategies (`events`, `envelopes`, ...) draw any value a
field's type admits, for the codec. `jobs` draws jobs that respect the state machine's
invariants, for the deciders. `histories` draws realistic sequences of events for one
partition: acks mostly come from the claim's source, timeouts mostly carry what the owner
saw, so a good share of the events apply instead of all being rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from pinledger.ledger.events import (
    Actor,
    Cancelled,
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Envelope,
    Event,
    Failed,
    FormatRaised,
    JobEvent,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    QueueResized,
    RecordSkipped,
    Retried,
    ScheduleTicked,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.state import TRANSITIONS, Job, JobState, Stamp, evolve

# A few ids, claims and sources, so that generated events often meet each other.
LOCAL_IDS = (0, 1, 2)
CLAIMS = ("claim-a", "claim-b", "claim-c")
SOURCES = ("svc:host-1", "svc:host-2")

# The codec carries integers as JSON numbers, which orjson keeps to 64 bits.
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
statuses = st.text()  # any unicode, surrogates excluded (they are not valid UTF-8)
bodies = st.binary()

actors = st.builds(Actor, source=st.text(), request_id=st.text(), server=st.text())

enqueued = st.builds(
    Enqueued,
    body=bodies,
    priority=i64,
    run_after=i64,
    attempts_allowed=i64,
    custom_status=statuses,
)
claimed = st.builds(Claimed, local_id=i64, claim=st.text())
succeeded = st.builds(Succeeded, local_id=i64, append_status=statuses, claim=st.none() | st.text())
failed = st.builds(
    Failed,
    local_id=i64,
    retry_delay_ms=i64,
    append_status=statuses,
    claim=st.none() | st.text(),
)
checkpointed = st.builds(
    Checkpointed,
    local_id=i64,
    new_body=st.none() | bodies,
    move_to_pending=st.booleans(),
    run_after=st.none() | i64,
    attempts_allowed=st.none() | i64,
    prepend_status=st.none() | statuses,
    claim=st.none() | st.text(),
)
timed_out = st.builds(TimedOut, local_id=i64, claim=st.text(), touched_at=i64)
retried = st.builds(Retried, local_id=i64, attempts_allowed=i64, run_after=i64)
deleted = st.builds(Deleted, local_id=i64, state=st.none() | st.integers(0, 3))
collected = st.builds(Collected, local_id=i64)
cancelled = st.builds(Cancelled, local_id=i64, reason=st.text())
queue_created = st.builds(QueueCreated, name=st.text(), partitions=i64)
queue_deleted = st.builds(QueueDeleted, name=st.text())
queue_resized = st.builds(QueueResized, name=st.text(), partitions=i64, reason=st.text())
partitions_retired = st.builds(PartitionsRetired, name=st.text(), first=i64, reason=st.text())
partition_placed = st.builds(
    PartitionPlaced, name=st.text(), partition=i64, shard=st.text(), reason=st.text()
)
partition_moved = st.builds(
    PartitionMoved,
    name=st.text(),
    partition=i64,
    source=st.text(),
    shard=st.text(),
    offset=i64,
)
record_skipped = st.builds(
    RecordSkipped, name=st.text(), partition=i64, offset=i64, reason=st.text()
)
queue_paused = st.builds(QueuePaused, name=st.text(), paused=st.booleans(), reason=st.text())
schedule_ticked = st.builds(
    ScheduleTicked, name=st.text(), schedule=st.text(), tick_ms=i64, job=st.text()
)
format_raised = st.builds(FormatRaised, format=i64)

EVENT_STRATEGIES: dict[type, st.SearchStrategy[Event]] = {
    Enqueued: enqueued,
    Claimed: claimed,
    Succeeded: succeeded,
    Failed: failed,
    Checkpointed: checkpointed,
    TimedOut: timed_out,
    Retried: retried,
    Deleted: deleted,
    Collected: collected,
    Cancelled: cancelled,
    QueueCreated: queue_created,
    QueueDeleted: queue_deleted,
    QueueResized: queue_resized,
    PartitionsRetired: partitions_retired,
    PartitionPlaced: partition_placed,
    PartitionMoved: partition_moved,
    RecordSkipped: record_skipped,
    QueuePaused: queue_paused,
    ScheduleTicked: schedule_ticked,
    FormatRaised: format_raised,
}

events: st.SearchStrategy[Event] = st.one_of(*EVENT_STRATEGIES.values())

envelopes = st.builds(
    Envelope,
    at=i64,
    actor=actors,
    events=st.lists(events, max_size=6).map(tuple),
)


@st.composite
def jobs(draw: st.DrawFn, state: JobState | None = None) -> Job:
    """A job that respects the invariants: attempts_remaining within 0..attempts_allowed
    (0 when FAILED), and a claim, its source and touched_at exactly when IN_PROGRESS."""
    state = draw(st.sampled_from(JobState)) if state is None else state
    times = st.integers(min_value=0, max_value=10_000)
    allowed = draw(st.integers(min_value=0, max_value=5))
    remaining = 0 if state is JobState.FAILED else draw(st.integers(0, allowed))
    in_progress = state is JobState.IN_PROGRESS
    return Job(
        local_id=draw(st.integers(min_value=0, max_value=10**6)),
        priority=draw(st.integers(min_value=1, max_value=3)),
        state=state,
        body=draw(st.binary(max_size=8)),
        attempts_allowed=allowed,
        attempts_remaining=remaining,
        custom_status=draw(st.text(max_size=8)),
        created_at=draw(times),
        run_after=draw(times),
        updated_at=draw(times),
        claim=draw(st.sampled_from(CLAIMS)) if in_progress else None,
        claim_source=draw(st.sampled_from(SOURCES)) if in_progress else None,
        touched_at=draw(times) if in_progress else None,
    )


# --- Histories of one partition -------------------------------------------------------

JOB_EVENT_TYPES: tuple[type, ...] = (
    Enqueued,
    Claimed,
    Succeeded,
    Failed,
    Checkpointed,
    TimedOut,
    Retried,
    Deleted,
    Collected,
    Cancelled,
)


@dataclass(frozen=True, slots=True)
class Step:
    """One event of the log as `evolve` sees it: the event, its envelope's stamp, and the
    job it concerns (for Enqueued, the id derived from the record's offset)."""

    event: JobEvent
    stamp: Stamp
    local_id: int


def _plausible_types(state: JobState | None) -> list[type]:
    """The event types that can apply in a state, except Deleted for unfinished jobs, so
    that jobs live long enough to go through their other states."""
    plausible = [kind for kind in JOB_EVENT_TYPES if (state, kind) in TRANSITIONS]
    if state in (JobState.PENDING, JobState.IN_PROGRESS):
        plausible.remove(Deleted)
        plausible.remove(Cancelled)
    return plausible


# Built once: constructing strategies inside the per-step draw dominates the run time.
# Mostly an event type that can apply in the job's state, else any type.
_kinds = {
    state: st.sampled_from(_plausible_types(state)) | st.sampled_from(JOB_EVENT_TYPES)
    for state in (None, *JobState)
}
_coin = st.booleans()
_claims = st.sampled_from(CLAIMS)
_sources = st.sampled_from(SOURCES)
_offsets = st.integers(min_value=-2, max_value=4)  # run_after relative to the clock
_ago = st.integers(min_value=0, max_value=10)
_attempts = st.integers(min_value=0, max_value=3)
_priorities = st.integers(min_value=1, max_value=3)
_delays = st.integers(min_value=0, max_value=5)
_statuses = st.text(alphabet="xyz", max_size=3)
_bodies = st.binary(max_size=4)
_ack_claims = st.sampled_from(("none", "current", "any"))


def _timeout(draw: st.DrawFn, local_id: int, job: Job | None, clock: int) -> TimedOut:
    """What the owner saw when it found the claim expired, or a stale view."""
    stale_touch = max(0, clock - draw(_ago))
    if job is None or job.claim is None or job.touched_at is None:
        return TimedOut(local_id, draw(_claims), stale_touch)
    return TimedOut(local_id, job.claim, job.touched_at if draw(_coin) else stale_touch)


@st.composite
def _next_step(draw: st.DrawFn, local_id: int, job: Job | None, clock: int) -> Step:
    def current_or_any(current: str | None, others: st.SearchStrategy[str]) -> str:
        return current if current is not None and draw(_coin) else draw(others)

    def soon() -> int:
        return clock + draw(_offsets)

    def ack_claim() -> str | None:
        # An ack names no claim (fenced by source, as PinLater acks are), the current
        # claim, or some claim that is probably stale.
        which = draw(_ack_claims)
        if which == "none":
            return None
        if which == "current" and claim is not None:
            return claim
        return draw(_claims)

    claim = None if job is None else job.claim
    kind = draw(_kinds[None if job is None else job.state])
    event: JobEvent
    if kind is Enqueued:
        event = Enqueued(
            body=draw(_bodies),
            priority=draw(_priorities),
            run_after=soon(),
            attempts_allowed=draw(_attempts),
            custom_status=draw(_statuses),
        )
    elif kind is Claimed:
        event = Claimed(local_id, draw(_claims))
    elif kind is Succeeded:
        event = Succeeded(local_id, draw(_statuses), ack_claim())
    elif kind is Failed:
        event = Failed(local_id, draw(_delays), draw(_statuses), ack_claim())
    elif kind is Checkpointed:
        event = Checkpointed(
            local_id,
            new_body=draw(_bodies) if draw(_coin) else None,
            move_to_pending=draw(_coin),
            run_after=soon() if draw(_coin) else None,
            attempts_allowed=draw(_attempts) if draw(_coin) else None,
            prepend_status=draw(_statuses) if draw(_coin) else None,
            claim=ack_claim(),
        )
    elif kind is TimedOut:
        event = _timeout(draw, local_id, job, clock)
    elif kind is Retried:
        event = Retried(local_id, draw(_attempts), soon())
    elif kind is Deleted:
        event = Deleted(local_id)
    elif kind is Cancelled:
        event = Cancelled(local_id, draw(_statuses))
    else:
        event = Collected(local_id)
    source = current_or_any(None if job is None else job.claim_source, _sources)
    return Step(event, Stamp(at=clock, actor=Actor(source=source)), local_id)


_ticks = st.integers(min_value=0, max_value=3)
_local_ids = st.sampled_from(LOCAL_IDS)


@st.composite
def histories(draw: st.DrawFn, max_steps: int = 40) -> list[Step]:
    """A realistic history of a few jobs of one partition. Each event is drawn knowing
    the state the earlier ones produced, the way a live owner would append it."""
    jobs: dict[int, Job] = {}
    steps: list[Step] = []
    clock = 0
    for _ in range(draw(st.integers(min_value=0, max_value=max_steps))):
        clock += draw(_ticks)  # the log's clock mostly advances
        local_id = draw(_local_ids)
        step = draw(_next_step(local_id, jobs.get(local_id), clock))
        job, _ = evolve(jobs.get(local_id), step.event, step.stamp, local_id)
        if job is None:
            jobs.pop(local_id, None)
        else:
            jobs[local_id] = job
        steps.append(step)
    return steps
