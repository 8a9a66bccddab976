"""A job's history laid out on a time axis: one bar per attempt, one mark per step.

Pure geometry over `projections.history.JobHistory` (the same reading of the timeline
rows `pinledger trace` prints). Each attempt's bar has segments:

- `delay`: waiting for run_after (the enqueue's initial delay, or the previous
  attempt's retry delay);
- `queued`: due, not yet claimed;
- `running`: claimed, until the ack, timeout or release (or now, while it runs);
- `lost`: the running time of an attempt that timed out: work done without a result.

Every step is a mark on the row of the attempt it belongs to (steps before the first
claim on the first row), at its time; rejected steps are flagged so the page draws
them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinledger.projections.history import JobHistory, Outcome, Step

LABEL_WIDTH = 90
ROW_HEIGHT = 34
AXIS_HEIGHT = 28


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str  # delay | queued | running | lost
    start: int
    end: int
    x: float
    width: float


@dataclass(frozen=True, slots=True)
class Bar:
    attempt: int
    outcome: str
    y: float
    segments: tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class Mark:
    step: Step
    x: float
    y: float
    rejected: bool


@dataclass(frozen=True, slots=True)
class Tick:
    at: int
    x: float


@dataclass(frozen=True, slots=True)
class Layout:
    width: int
    height: int
    start: int
    end: int
    bars: tuple[Bar, ...]
    marks: tuple[Mark, ...]
    ticks: tuple[Tick, ...]


class _Scale:
    def __init__(self, start: int, end: int, width: int) -> None:
        self.start = start
        self.span = max(end - start, 1)
        self.plot = width - LABEL_WIDTH - 10

    def x(self, at: int) -> float:
        return LABEL_WIDTH + (at - self.start) * self.plot / self.span


def _segments(history: JobHistory, now: int) -> list[list[tuple[str, int, int]]]:
    """(kind, start, end) per attempt, in time order."""
    bars: list[list[tuple[str, int, int]]] = []
    previous_end: int | None = history.enqueued_at
    for attempt in history.attempts:
        parts: list[tuple[str, int, int]] = []
        if previous_end is not None and attempt.due_at > previous_end:
            parts.append(("delay", previous_end, attempt.due_at))
        if attempt.claimed_at > attempt.due_at:
            parts.append(("queued", attempt.due_at, attempt.claimed_at))
        end = attempt.ended_at if attempt.ended_at is not None else max(now, attempt.claimed_at)
        kind = "lost" if attempt.outcome is Outcome.TIMED_OUT else "running"
        parts.append((kind, attempt.claimed_at, end))
        if attempt.retry_delay_ms:
            parts.append(("delay", end, end + attempt.retry_delay_ms))
        previous_end = end + (attempt.retry_delay_ms or 0)
        bars.append(parts)
    if not bars and history.enqueued_at is not None and history.job is not None:
        # Never claimed: one bar of waiting, up to now (or until it left the queue).
        due = max(history.job.run_after, history.enqueued_at)
        parts = []
        if due > history.enqueued_at:
            parts.append(("delay", history.enqueued_at, min(due, max(now, history.enqueued_at))))
        if now > due:
            parts.append(("queued", due, now))
        bars.append(parts)
    return bars


def _ticks(scale: _Scale, start: int, end: int, count: int = 5) -> tuple[Tick, ...]:
    if end <= start:
        return (Tick(start, scale.x(start)),)
    step = (end - start) / count
    return tuple(
        Tick(round(start + i * step), scale.x(round(start + i * step))) for i in range(count + 1)
    )


def layout(history: JobHistory, now: int, width: int = 960) -> Layout:
    """The bars and marks of a job's history, scaled to `width` pixels."""
    raw = _segments(history, now)
    times = [t for bar in raw for _, a, b in bar for t in (a, b)]
    times += [step.at for step in history.steps]
    start = min(times) if times else now
    end = max(times) if times else now
    scale = _Scale(start, end, width)
    rows = max(len(raw), 1)
    bars = tuple(
        Bar(
            attempt=i + 1,
            outcome=history.attempts[i].outcome.value if i < len(history.attempts) else "waiting",
            y=AXIS_HEIGHT + i * ROW_HEIGHT,
            segments=tuple(
                Segment(kind, a, b, scale.x(a), max(scale.x(b) - scale.x(a), 1.0))
                for kind, a, b in parts
            ),
        )
        for i, parts in enumerate(raw)
    )
    marks = tuple(
        Mark(
            step=step,
            x=scale.x(step.at),
            y=AXIS_HEIGHT + (min(max(step.attempt, 1), rows) - 1) * ROW_HEIGHT + ROW_HEIGHT / 2,
            rejected=not step.applied,
        )
        for step in history.steps
    )
    height = AXIS_HEIGHT + rows * ROW_HEIGHT + 8
    return Layout(width, height, start, end, bars, marks, _ticks(scale, start, end))
