"""How many partitions a queue should take new jobs on, when the operator lets the
servers adapt the count (issue 24, part 3): `"partitions": {"min": 1, "max": 32}` in the
queue config, as Pinterest's Pacer adapts its queues.

A pure function of measured numbers: no clock, no I/O, so every rule is a table test.
The caller measures the queue over a window, tells how long ago its last change was, and
appends the resize when `decide` returns a `Change`. The rules, in order:

1. Out of bounds, back in bounds at once, cooldown or not: the operator changed the
   bounds, and a count the config forbids is not the servers' to keep.
2. Cooldown: no adaptive change sooner than `cooldown_s` after the last one, so a queue
   does not flap while the measurements of the new count settle (a grown queue's new
   partitions start empty; a shrunk queue's drain for a while). `None` for the time
   since means no change is known: no cooldown.
3. Grow when one open partition takes more than `grow_rate` enqueues/s or holds more than
   `grow_backlog` due jobs. The new count is the smallest that brings both figures to
   the thresholds or below, at least one more and at most double (a big step at once
   adds partitions a burst may not need, and the next window measures the step), capped
   at the maximum.
4. Shrink when most dequeue calls come back empty (more than `shrink_empty_ratio` of at
   least `min_dequeues` calls: fewer say nothing about the queue) and nothing asks to
   grow: to half, at least the minimum. With hysteresis: never to a count whose load per
   partition would pass half the grow thresholds, or the next window would grow it back
   and the queue would flap between two counts; the shrink is smaller, or none.
5. Otherwise no change.

A `Change` never equals the current count. Empty dequeues measure idle consumers, not
load: they only ever shrink, and only a load figure grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bounds:
    min: int
    max: int  # validated elsewhere: 1 <= min <= max


@dataclass(frozen=True, slots=True)
class Thresholds:
    grow_rate: float = 200.0  # jobs enqueued/s per open partition above which it grows
    grow_backlog: int = 1000  # due PENDING jobs per open partition above which it grows
    shrink_empty_ratio: float = 0.5  # share of dequeue calls answered empty above which it shrinks
    min_dequeues: int = 50  # fewer dequeue calls measured: no shrink signal at all
    cooldown_s: float = 300.0  # no adaptive change sooner than this after the last change


@dataclass(frozen=True, slots=True)
class Measured:
    enqueue_rate: float  # jobs enqueued/s into the whole queue over the window
    due_backlog: int  # PENDING jobs due now in the whole queue
    dequeues: int  # dequeue calls on the queue in the window
    empty_dequeues: int  # of those, answered with no job


@dataclass(frozen=True, slots=True)
class Change:
    partitions: int
    reason: str  # one line for an operator, numbers included


def decide(
    current: int,
    bounds: Bounds,
    measured: Measured,
    since_last_change_s: float | None,
    thresholds: Thresholds = Thresholds(),
) -> Change | None:
    """The partition count the queue should change to, or None to keep `current`."""
    _check(current, bounds, measured, since_last_change_s, thresholds)
    if current < bounds.min:
        return Change(bounds.min, f"adaptive: below the minimum of {bounds.min}")
    if current > bounds.max:
        return Change(bounds.max, f"adaptive: above the maximum of {bounds.max}")
    # A negative age (a clock stepped back) is still a recent change: it waits too.
    if since_last_change_s is not None and since_last_change_s < thresholds.cooldown_s:
        return None

    rate, backlog = measured.enqueue_rate, measured.due_backlog
    over_rate = _rate_above(rate, current, thresholds.grow_rate)
    over_backlog = _backlog_above(backlog, current, thresholds.grow_backlog)
    if over_rate or over_backlog:
        # A queue at its maximum that still wants to grow stays; it never shrinks on it.
        if current >= bounds.max:
            return None
        return _grow(current, bounds, measured, thresholds, over_rate, over_backlog)
    return _shrink(current, bounds, measured, thresholds)


def _grow(
    current: int,
    bounds: Bounds,
    measured: Measured,
    thresholds: Thresholds,
    over_rate: bool,
    over_backlog: bool,
) -> Change:
    rate, backlog = measured.enqueue_rate, measured.due_backlog
    # The counts past double are never used, so they need not be computed.
    ceiling = 2 * current
    needed = max(
        _fewest_for_rate(rate, thresholds.grow_rate, ceiling),
        _fewest_for_backlog(backlog, thresholds.grow_backlog, ceiling),
    )
    partitions = min(max(needed, current + 1), ceiling, bounds.max)
    signals = []
    if over_rate:
        shown = _load(rate / current, thresholds.grow_rate)
        signals.append(
            f"{shown} enqueues/s per partition over {current} partitions, "
            f"above {_plain(thresholds.grow_rate)}"
        )
    if over_backlog:
        shown = _load(backlog / current, thresholds.grow_backlog)
        where = "" if over_rate else f" over {current} partitions"
        signals.append(
            f"{shown} due jobs per partition{where}, above {_plain(thresholds.grow_backlog)}"
        )
    return Change(partitions, "adaptive: " + "; ".join(signals))


def _shrink(
    current: int, bounds: Bounds, measured: Measured, thresholds: Thresholds
) -> Change | None:
    calls, empty = measured.dequeues, measured.empty_dequeues
    # Below min_dequeues the share is noise (a few polls of an idle consumer); _check
    # keeps min_dequeues >= 1, so calls is never 0 past here.
    if calls < thresholds.min_dequeues:
        return None
    share = empty / calls
    if share <= thresholds.shrink_empty_ratio or current <= bounds.min:
        return None
    halved = max(bounds.min, current // 2)
    # Hysteresis: the smallest count that keeps the load at half the grow thresholds or
    # below, so the next window does not grow the queue straight back. Twice the load
    # against the whole threshold is the same test, and never divides by a threshold
    # halved to zero.
    steady = max(
        _fewest_for_rate(2 * measured.enqueue_rate, thresholds.grow_rate, current),
        _fewest_for_backlog(2 * measured.due_backlog, thresholds.grow_backlog, current),
    )
    partitions = max(halved, steady)
    if partitions >= current:
        return None
    shown = _shown_above(100 * share, 100 * thresholds.shrink_empty_ratio)
    return Change(partitions, f"adaptive: {shown}% of {calls} dequeue calls came back empty")


def _rate_above(rate: float, partitions: int, limit: float) -> bool:
    # The one comparison both the signal and the counts use, so a count computed to be
    # enough is never found too few by the signal (float rounding).
    return rate / partitions > limit


def _backlog_above(backlog: int, partitions: int, limit: int) -> bool:
    # In integers: backlog / partitions > limit, exact for any size.
    return backlog > limit * partitions


def _fewest_for_rate(rate: float, limit: float, ceiling: int) -> int:
    """The smallest count >= 1 with rate / count <= limit, or `ceiling` if that is more."""
    estimate = rate / limit
    if estimate >= ceiling:
        return ceiling
    count = max(1, math.ceil(estimate))
    # The division above and the one in _rate_above may round apart: settle on the
    # count _rate_above agrees with (a step or none either way).
    while count > 1 and not _rate_above(rate, count - 1, limit):
        count -= 1
    while count < ceiling and _rate_above(rate, count, limit):
        count += 1
    return count


def _fewest_for_backlog(backlog: int, limit: int, ceiling: int) -> int:
    """The smallest count >= 1 with backlog / count <= limit, or `ceiling` if that is more."""
    return min(max(1, -(-backlog // limit)), ceiling)


def _shown_above(value: float, threshold: float, decimals: int = 0) -> str:
    """`value` with at least `decimals` decimals and as few more as still read above
    `threshold`: 200.25 over 200 reads "200.2", not "200", which would contradict the
    "above 200" beside it."""
    for places in range(decimals, decimals + 4):
        text = f"{value:.{places}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        if float(text) > threshold:
            return text
    return repr(value)


def _load(value: float, threshold: float) -> str:
    """A load per partition to three significant figures or more: 812, 12.5, 0.25."""
    return _shown_above(value, threshold, max(0, 3 - len(str(int(value)))))


def _plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _check(
    current: int,
    bounds: Bounds,
    measured: Measured,
    since_last_change_s: float | None,
    thresholds: Thresholds,
) -> None:
    """ValueError for inputs no measurement or config can mean: a wrong figure would
    otherwise resize a queue silently."""
    if current < 1:
        raise ValueError(f"current partitions must be at least 1, got {current}")
    if not 1 <= bounds.min <= bounds.max:
        raise ValueError(f"bounds need 1 <= min <= max, got min {bounds.min}, max {bounds.max}")
    if not math.isfinite(measured.enqueue_rate) or measured.enqueue_rate < 0:
        raise ValueError(f"enqueue_rate must be a finite number >= 0, got {measured.enqueue_rate}")
    for name, value in (
        ("due_backlog", measured.due_backlog),
        ("dequeues", measured.dequeues),
        ("empty_dequeues", measured.empty_dequeues),
    ):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if measured.empty_dequeues > measured.dequeues:
        raise ValueError(
            f"empty_dequeues ({measured.empty_dequeues}) cannot exceed "
            f"dequeues ({measured.dequeues})"
        )
    if since_last_change_s is not None and math.isnan(since_last_change_s):
        raise ValueError("since_last_change_s is NaN; pass None when no change is known")
    if not math.isfinite(thresholds.grow_rate) or thresholds.grow_rate <= 0:
        raise ValueError(f"grow_rate must be a finite number > 0, got {thresholds.grow_rate}")
    if thresholds.grow_backlog < 1:
        raise ValueError(f"grow_backlog must be at least 1, got {thresholds.grow_backlog}")
    if not 0 <= thresholds.shrink_empty_ratio <= 1:
        raise ValueError(
            f"shrink_empty_ratio must be within 0..1, got {thresholds.shrink_empty_ratio}"
        )
    if thresholds.min_dequeues < 1:
        raise ValueError(f"min_dequeues must be at least 1, got {thresholds.min_dequeues}")
    if not thresholds.cooldown_s >= 0:  # also refuses NaN
        raise ValueError(f"cooldown_s must be >= 0, got {thresholds.cooldown_s}")
