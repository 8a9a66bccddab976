"""A job's history: its timeline rows (job_events) read as steps and attempts.

Pure code over `EventRow`s, shared by the server's getJobHistory, `pinledger trace`
and the OTLP export of a job's life. Two readings of the same rows:

- `steps`: one per event that named the job, applied or rejected, in log order, with
  who asked, the claim, the attempt it belongs to, the custom status change and the
  job's state after it (as the projection recorded it).
- `attempts`: one per applied claim, with its latency breakdown. For a job that ran to
  its end without an operator's retry or delete, the breakdown adds up exactly:

      initial_delay + sum(queued + running + retry_delay) == last ended_at - enqueued_at

The job as of the last step (`job`) is computed by folding the events, rebuilt from the
rows' details, through `ledger.state.evolve`: the state machine stays the only place
that knows how a job changes, and `build_history(d, rows up to offset o)` is the job as
of step o. Bodies are not in the timeline (only their size), so a snapshot has
`body_bytes`, never the body.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pinledger.ledger import events as ev
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.outcome import AttemptEnd, classify
from pinledger.ledger.state import FINISHED, Job, JobState, Stamp, evolve
from pinledger.projections.actions import EVENT_TYPES, Tag, action_of
from pinledger.projections.store import EventRow

_FENCED_BY_SOURCE = frozenset({Tag.SUCCEEDED, Tag.FAILED, Tag.CHECKPOINTED})


class Outcome(StrEnum):
    """How an attempt ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed out"
    # A checkpoint with move_to_pending handed the job back without using up the attempt
    # as a failure (chained and cron-like jobs).
    RELEASED = "released"
    DELETED = "deleted"
    RUNNING = "still running"


# How the classifier's attempt ends read in a history (the words are on the wire).
_ENDED: dict[AttemptEnd, Outcome] = {
    AttemptEnd.SUCCEEDED: Outcome.SUCCEEDED,
    AttemptEnd.FAILED: Outcome.FAILED,
    AttemptEnd.TIMED_OUT: Outcome.TIMED_OUT,
    AttemptEnd.RELEASED: Outcome.RELEASED,
    AttemptEnd.DELETED: Outcome.DELETED,
}


@dataclass(frozen=True, slots=True)
class StatusChange:
    """What an action did to the custom status: `set` (enqueue), `append` (acks) or
    `prepend` (checkpoints)."""

    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The job as of a step (the body only by its size)."""

    state: JobState
    priority: int
    run_after: int
    attempts_allowed: int
    attempts_remaining: int
    custom_status: str
    created_at: int
    updated_at: int
    claim: str | None
    claim_source: str | None
    touched_at: int | None
    body_bytes: int
    # A unique job's key (decision 0037); None: enqueued without one.
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    offset: int
    idx: int
    at: int
    action: str
    source: str
    request_id: str
    server: str
    claim: str | None
    # The attempt the step belongs to: the one whose claim it names, else the latest
    # (0 before the first claim).
    attempt: int
    status_change: StatusChange | None
    state_after: JobState | None
    attempts_remaining_after: int | None
    applied: bool
    reason: str
    traceparent: str | None
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    claim: str
    claimed_at: int
    claim_offset: int
    # When the job became due for this attempt (enqueue, retry delay over, ...).
    due_at: int
    outcome: Outcome
    ended_at: int | None
    end_offset: int | None
    # From becoming due to the claim.
    queued_ms: int
    # From the claim to the end; None while running.
    running_ms: int | None
    # Delay scheduled after the attempt before the job was due again; None when the job
    # did not go back to PENDING.
    retry_delay_ms: int | None
    # A timed-out attempt's whole running time: work done without a result.
    timeout_lost_ms: int


@dataclass(frozen=True, slots=True)
class JobHistory:
    queue: str
    partition: int
    local_id: int
    descriptor: str
    steps: tuple[Step, ...]
    attempts: tuple[Attempt, ...]
    enqueued_at: int | None
    # From the enqueue to the first time the job was due (its run_after).
    initial_delay_ms: int | None
    # The job after the last step; None when it was removed or never existed.
    job: Snapshot | None

    @property
    def finished_at(self) -> int | None:
        """When the job reached SUCCEEDED or FAILED for the last time (None if not)."""
        for step in reversed(self.steps):
            if step.applied and step.state_after in FINISHED:
                return step.at
        return None


def event_from_row(row: EventRow) -> ev.JobEvent | None:
    """The event a timeline row recorded, rebuilt from its detail (bodies as zero bytes
    of the recorded size); None for a type this version does not know."""
    cls = EVENT_TYPES.get(row.type)
    if cls is None:
        return None
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "local_id":
            kwargs[f.name] = row.local_id
        elif f"{f.name}_bytes" in row.detail:
            kwargs[f.name] = bytes(int(row.detail[f"{f.name}_bytes"]))
        elif f.name in row.detail:
            kwargs[f.name] = row.detail[f.name]
    try:
        event: ev.JobEvent = cls(**kwargs)
    except TypeError:
        # A field this version requires is missing: an older or newer codec.
        return None
    return event


def _status_change(row: EventRow) -> StatusChange | None:
    if row.type == Tag.ENQUEUED and row.detail.get("custom_status"):
        return StatusChange("set", str(row.detail["custom_status"]))
    if row.type in (Tag.SUCCEEDED, Tag.FAILED) and row.detail.get("append_status"):
        return StatusChange("append", str(row.detail["append_status"]))
    if row.type == Tag.CHECKPOINTED and row.detail.get("prepend_status"):
        return StatusChange("prepend", str(row.detail["prepend_status"]))
    return None


def _reason(verdict: str) -> str:
    prefix = "rejected: "
    return verdict[len(prefix) :] if verdict.startswith(prefix) else verdict


def _snapshot(job: Job | None, body_bytes: int) -> Snapshot | None:
    if job is None:
        return None
    return Snapshot(
        state=job.state,
        priority=job.priority,
        run_after=job.run_after,
        attempts_allowed=job.attempts_allowed,
        attempts_remaining=job.attempts_remaining,
        custom_status=job.custom_status,
        created_at=job.created_at,
        updated_at=job.updated_at,
        claim=job.claim,
        claim_source=job.claim_source,
        touched_at=job.touched_at,
        body_bytes=body_bytes,
        unique_key=job.unique_key,
    )


class _Attempts:
    """Folds applied steps into attempts."""

    def __init__(self) -> None:
        self.done: list[Attempt] = []
        self.open: Attempt | None = None
        self.due_at: int | None = None
        self.enqueued_at: int | None = None
        self.initial_delay_ms: int | None = None
        self.by_claim: dict[str, int] = {}
        self.by_source: dict[str, int] = {}
        # The job's state after the last applied step (None before the enqueue).
        self.state: JobState | None = None

    @property
    def latest(self) -> int:
        return len(self.done) + (self.open is not None)

    def _due(self, at: int, run_after: int) -> None:
        self.due_at = max(at, run_after)

    def _end(self, row: EventRow, outcome: Outcome, retry_delay: int | None, lost: int = 0) -> None:
        if self.open is None:
            return
        self.done.append(
            dataclasses.replace(
                self.open,
                outcome=outcome,
                ended_at=row.at,
                end_offset=row.offset,
                running_ms=max(row.at - self.open.claimed_at, 0),
                retry_delay_ms=retry_delay,
                timeout_lost_ms=lost,
            )
        )
        self.open = None

    def _claim(self, row: EventRow) -> None:
        if self.open is not None:  # not possible by the state machine
            self._end(row, Outcome.RELEASED, None)
        due = row.at if self.due_at is None else self.due_at
        claim = row.claim or ""
        self.open = Attempt(
            number=self.latest + 1,
            claim=claim,
            claimed_at=row.at,
            claim_offset=row.offset,
            due_at=due,
            outcome=Outcome.RUNNING,
            ended_at=None,
            end_offset=None,
            queued_ms=max(row.at - due, 0),
            running_ms=None,
            retry_delay_ms=None,
            timeout_lost_ms=0,
        )
        self.by_claim[claim] = self.open.number
        self.by_source[row.source] = self.open.number

    def step(self, row: EventRow) -> None:
        """Fold one row. What the row did to the attempt comes from the one outcome
        classifier (ledger/outcome.py); this only adds the times."""
        if not row.applied:
            return
        kind = EVENT_TYPES.get(row.type)
        if kind is None:
            return
        after = None if row.state_after is None else JobState(row.state_after)
        before, self.state = self.state, after
        c = classify(kind, before, after, applied=True)
        detail = row.detail
        if kind is ev.Enqueued:
            self.enqueued_at = row.at
            self._due(row.at, int(detail.get("run_after", row.at)))
            assert self.due_at is not None
            self.initial_delay_ms = self.due_at - row.at
        elif kind is ev.Claimed:
            self._claim(row)
        elif kind is ev.Retried:
            self._due(row.at, int(detail.get("run_after", row.at)))
        if c.attempt_end is None:
            return
        lost = 0
        if c.attempt_end is AttemptEnd.TIMED_OUT and self.open is not None:
            lost = max(row.at - self.open.claimed_at, 0)
        due_again: int | None = None
        if c.requeued:
            match c.attempt_end:
                case AttemptEnd.FAILED:
                    due_again = row.at + max(int(detail.get("retry_delay_ms", 0)), 0)
                case AttemptEnd.RELEASED:
                    due_again = max(row.at, int(detail.get("run_after", row.at)))
                case _:
                    due_again = row.at
        delay = None if due_again is None else due_again - row.at
        self._end(row, _ENDED[c.attempt_end], delay, lost)
        if due_again is not None:
            self.due_at = due_again

    def attempt_of(self, row: EventRow) -> int:
        named = row.detail.get("claim")
        if isinstance(named, str) and named in self.by_claim:
            return self.by_claim[named]
        if not row.applied and named is None and row.type in _FENCED_BY_SOURCE:
            # A PinLater ack names no claim: a rejected one comes from the attempt its
            # source last claimed (a worker whose claim timed out), if any.
            return self.by_source.get(row.source, self.latest)
        if row.claim is not None and row.claim in self.by_claim:
            return self.by_claim[row.claim]
        return self.latest

    def all(self) -> tuple[Attempt, ...]:
        return tuple(self.done) + ((self.open,) if self.open is not None else ())


def build_history(
    descriptor: JobDescriptor, rows: Sequence[EventRow], at_offset: int | None = None
) -> JobHistory:
    """The job's history from its timeline rows (in log order); with `at_offset`, only
    the steps at or before that offset: the job as it was then."""
    ordered = sorted(
        (r for r in rows if at_offset is None or r.offset <= at_offset),
        key=lambda r: (r.offset, r.idx),
    )
    attempts = _Attempts()
    steps: list[Step] = []
    job: Job | None = None
    body_bytes = 0
    for row in ordered:
        attempts.step(row)
        event = event_from_row(row)
        # A rejected event changed nothing (a keyed enqueue turned away, decision 0037,
        # is rejected for a reason this job's rows alone cannot show).
        if event is not None and row.applied:
            job, _ = evolve(
                job,
                event,
                Stamp(row.at, ev.Actor(row.source, row.request_id, row.server)),
                row.local_id,
            )
            if row.applied:
                size = row.detail.get("body_bytes", row.detail.get("new_body_bytes"))
                if size is not None:
                    body_bytes = int(size)
        steps.append(
            Step(
                offset=row.offset,
                idx=row.idx,
                at=row.at,
                action=action_of(row.type),
                source=row.source,
                request_id=row.request_id,
                server=row.server,
                claim=row.claim,
                attempt=attempts.attempt_of(row),
                status_change=_status_change(row),
                state_after=None if row.state_after is None else JobState(row.state_after),
                attempts_remaining_after=row.attempts_remaining_after,
                applied=row.applied,
                reason="" if row.applied else _reason(row.verdict),
                traceparent=row.traceparent,
                detail=dict(row.detail),
            )
        )
    return JobHistory(
        queue=descriptor.queue,
        partition=descriptor.partition,
        local_id=descriptor.local_id,
        descriptor=str(descriptor),
        steps=tuple(steps),
        attempts=attempts.all(),
        enqueued_at=attempts.enqueued_at,
        initial_delay_ms=attempts.initial_delay_ms,
        job=_snapshot(job, body_bytes),
    )


def to_json(history: JobHistory) -> dict[str, Any]:
    """A JSON-ready dict (enums by name, outcomes by their words)."""

    def plain(value: Any) -> Any:
        if isinstance(value, JobState):
            return value.name
        if isinstance(value, Outcome):
            return value.value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    out: dict[str, Any] = plain(history)
    out["finished_at"] = history.finished_at
    return out
