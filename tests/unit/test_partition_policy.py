"""The adaptive partition policy (issue 24, part 3): a table of every rule and its edges,
the reasons an operator reads, the inputs it refuses, and properties over any numbers:
within bounds, never the current count, at most double, still in cooldown, and no step
that the next decision would undo."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pinledger.service.partition_policy import (
    Bounds,
    Change,
    Measured,
    Thresholds,
    decide,
)

WIDE = Bounds(1, 32)
QUIET = Measured(enqueue_rate=0.0, due_backlog=0, dequeues=0, empty_dequeues=0)
# Most dequeue calls empty and no load: the shrink signal, with room under the defaults.
IDLE = Measured(enqueue_rate=0.0, due_backlog=0, dequeues=100, empty_dequeues=80)


def rate(r: float, dequeues: int = 0, empty: int = 0) -> Measured:
    return Measured(enqueue_rate=r, due_backlog=0, dequeues=dequeues, empty_dequeues=empty)


def backlog(b: int, r: float = 0.0) -> Measured:
    return Measured(enqueue_rate=r, due_backlog=b, dequeues=0, empty_dequeues=0)


def idle(dequeues: int, empty: int, r: float = 0.0, b: int = 0) -> Measured:
    return Measured(enqueue_rate=r, due_backlog=b, dequeues=dequeues, empty_dequeues=empty)


# The default thresholds: grow above 200 enqueues/s or 1000 due jobs per partition, shrink
# above 50% empty of at least 50 calls, 300 s cooldown.
CASES = [
    # Rule 1: back within bounds first, cooldown or not.
    pytest.param(1, Bounds(2, 8), QUIET, None, 2, id="below-min-clamps-up"),
    pytest.param(12, Bounds(1, 8), QUIET, None, 8, id="above-max-clamps-down"),
    pytest.param(1, Bounds(2, 8), QUIET, 1.0, 2, id="below-min-clamps-during-cooldown"),
    pytest.param(12, Bounds(1, 8), QUIET, 1.0, 8, id="above-max-clamps-during-cooldown"),
    pytest.param(1, Bounds(6, 8), QUIET, None, 6, id="clamp-up-may-more-than-double"),
    pytest.param(12, Bounds(1, 8), rate(1e6), None, 8, id="above-max-clamps-despite-grow"),
    pytest.param(2, Bounds(4, 8), IDLE, None, 4, id="below-min-clamps-despite-shrink"),
    # Rule 2: cooldown.
    pytest.param(4, WIDE, rate(4000), 299.9, None, id="cooldown-blocks-grow"),
    pytest.param(8, WIDE, IDLE, 0.0, None, id="cooldown-blocks-shrink"),
    pytest.param(4, WIDE, rate(4000), -5.0, None, id="negative-age-counts-as-recent"),
    pytest.param(4, WIDE, rate(4000), 300.0, 8, id="cooldown-over-at-exactly-cooldown"),
    pytest.param(4, WIDE, rate(4000), None, 8, id="no-known-change-no-cooldown"),
    # Rule 3: grow.
    pytest.param(4, WIDE, rate(800), None, None, id="rate-exactly-at-threshold"),
    pytest.param(4, WIDE, rate(800.5), None, 5, id="rate-just-above-grows-by-one"),
    pytest.param(4, WIDE, rate(1400), None, 7, id="rate-grows-to-smallest-enough"),
    pytest.param(4, WIDE, rate(1600), None, 8, id="rate-grows-to-exactly-double"),
    pytest.param(4, WIDE, rate(4000), None, 8, id="grow-capped-at-double"),
    pytest.param(1, WIDE, rate(1e6), None, 2, id="one-partition-grows-to-two"),
    pytest.param(4, Bounds(1, 6), rate(4000), None, 6, id="grow-capped-at-max"),
    pytest.param(5, Bounds(1, 6), rate(1001), None, 6, id="grow-by-one-to-max"),
    pytest.param(8, Bounds(1, 8), rate(1e6), None, None, id="at-max-with-grow-signal"),
    pytest.param(8, Bounds(1, 8), idle(100, 100, r=1e6), None, None, id="at-max-grow-no-shrink"),
    pytest.param(4, WIDE, backlog(4000), None, None, id="backlog-exactly-at-threshold"),
    pytest.param(4, WIDE, backlog(4001), None, 5, id="backlog-just-above-grows-by-one"),
    pytest.param(4, WIDE, backlog(6500), None, 7, id="backlog-only-grow"),
    pytest.param(4, WIDE, backlog(1_000_000), None, 8, id="backlog-grow-capped-at-double"),
    pytest.param(4, WIDE, backlog(6500, r=1000), None, 7, id="both-signals-backlog-needs-more"),
    pytest.param(4, WIDE, backlog(4400, r=1400), None, 7, id="both-signals-rate-needs-more"),
    pytest.param(4, WIDE, backlog(4000, r=1400), None, 7, id="rate-signal-backlog-at-limit"),
    pytest.param(4, WIDE, backlog(6000, r=800), None, 6, id="backlog-signal-rate-at-limit"),
    pytest.param(4, WIDE, idle(100, 90, r=1400), None, 7, id="grow-wins-over-shrink-signal"),
    # Rule 4: shrink.
    pytest.param(8, WIDE, IDLE, None, 4, id="shrink-halves"),
    pytest.param(5, WIDE, IDLE, None, 2, id="shrink-halves-odd-down"),
    pytest.param(2, WIDE, IDLE, None, 1, id="shrink-two-to-one"),
    pytest.param(8, Bounds(6, 32), IDLE, None, 6, id="shrink-floors-at-min"),
    pytest.param(2, Bounds(2, 32), IDLE, None, None, id="at-min-with-shrink-signal"),
    pytest.param(1, WIDE, IDLE, None, None, id="one-partition-never-shrinks"),
    pytest.param(8, WIDE, idle(49, 49), None, None, id="shrink-needs-min-dequeues"),
    pytest.param(8, WIDE, idle(50, 26), None, 4, id="shrink-at-exactly-min-dequeues"),
    pytest.param(8, WIDE, idle(100, 50), None, None, id="empty-ratio-exactly-at-threshold"),
    pytest.param(8, WIDE, idle(100, 51), None, 4, id="empty-ratio-just-above"),
    pytest.param(8, WIDE, idle(0, 0), None, None, id="no-dequeue-calls-no-shrink"),
    pytest.param(8, WIDE, idle(100, 80, r=400), None, 4, id="hysteresis-exactly-half-allowed"),
    pytest.param(8, WIDE, idle(100, 80, r=600), None, 6, id="hysteresis-reduces-on-rate"),
    pytest.param(8, WIDE, idle(100, 80, r=1400), None, None, id="hysteresis-blocks-on-rate"),
    pytest.param(8, WIDE, idle(100, 80, b=2000), None, 4, id="hysteresis-backlog-exactly-half"),
    pytest.param(8, WIDE, idle(100, 80, b=2500), None, 5, id="hysteresis-reduces-on-backlog"),
    pytest.param(8, WIDE, idle(100, 80, b=3501), None, None, id="hysteresis-blocks-on-backlog"),
    pytest.param(8, WIDE, idle(100, 80, r=500, b=3000), None, 6, id="hysteresis-larger-need-wins"),
    pytest.param(16, Bounds(10, 32), idle(100, 80, r=600), None, 10, id="hysteresis-under-min"),
    # min == max: only clamping ever changes it.
    pytest.param(4, Bounds(4, 4), QUIET, None, None, id="fixed-quiet"),
    pytest.param(4, Bounds(4, 4), rate(1e6), None, None, id="fixed-with-grow-signal"),
    pytest.param(4, Bounds(4, 4), IDLE, None, None, id="fixed-with-shrink-signal"),
    pytest.param(2, Bounds(4, 4), IDLE, 1.0, 4, id="fixed-clamps-up"),
    pytest.param(6, Bounds(4, 4), rate(1e6), 1.0, 4, id="fixed-clamps-down"),
    # Rule 5: nothing to do.
    pytest.param(4, WIDE, QUIET, None, None, id="quiet-keeps"),
    pytest.param(4, WIDE, idle(1000, 400, r=500, b=2000), None, None, id="busy-keeps"),
]


@pytest.mark.parametrize(("current", "bounds", "measured", "since", "expected"), CASES)
def test_decide(
    current: int, bounds: Bounds, measured: Measured, since: float | None, expected: int | None
) -> None:
    change = decide(current, bounds, measured, since)
    assert (change.partitions if change else None) == expected


def test_thresholds_are_the_ones_given() -> None:
    strict = Thresholds(
        grow_rate=10.0, grow_backlog=5, shrink_empty_ratio=0.9, min_dequeues=5, cooldown_s=0.0
    )
    assert decide(4, WIDE, rate(50), 0.0, strict) == Change(
        5, "adaptive: 12.5 enqueues/s per partition over 4 partitions, above 10"
    )
    assert decide(4, WIDE, backlog(21), 0.0, strict) == Change(
        5, "adaptive: 5.25 due jobs per partition over 4 partitions, above 5"
    )
    assert decide(8, WIDE, idle(10, 9), 0.0, strict) is None  # 90% is not above 90%
    assert decide(8, WIDE, idle(10, 10), 0.0, strict) == Change(
        4, "adaptive: 100% of 10 dequeue calls came back empty"
    )
    assert decide(8, WIDE, idle(10, 10, r=30), 0.0, strict) == Change(
        6, "adaptive: 100% of 10 dequeue calls came back empty"
    )
    # A cooldown of its own: 60 s after the last change is still too soon for 120.
    assert decide(4, WIDE, rate(4000), 60.0, Thresholds(cooldown_s=120.0)) is None
    assert decide(4, WIDE, rate(4000), 60.0, Thresholds(cooldown_s=30.0)) is not None


@pytest.mark.parametrize(
    ("current", "bounds", "measured", "reason"),
    [
        pytest.param(
            4,
            WIDE,
            rate(3248),
            "adaptive: 812 enqueues/s per partition over 4 partitions, above 200",
            id="rate",
        ),
        pytest.param(
            4,
            WIDE,
            backlog(6500),
            "adaptive: 1625 due jobs per partition over 4 partitions, above 1000",
            id="backlog",
        ),
        pytest.param(
            4,
            WIDE,
            backlog(6500, r=3248),
            "adaptive: 812 enqueues/s per partition over 4 partitions, above 200; "
            "1625 due jobs per partition, above 1000",
            id="both",
        ),
        pytest.param(
            4,
            WIDE,
            rate(801),
            "adaptive: 200.2 enqueues/s per partition over 4 partitions, above 200",
            id="rate-rounded-still-reads-above",
        ),
        pytest.param(
            8,
            WIDE,
            idle(412, 301),
            "adaptive: 73% of 412 dequeue calls came back empty",
            id="shrink",
        ),
        pytest.param(
            8,
            WIDE,
            idle(200, 101),
            "adaptive: 50.5% of 200 dequeue calls came back empty",
            id="shrink-rounded-still-reads-above",
        ),
        pytest.param(1, Bounds(3, 8), QUIET, "adaptive: below the minimum of 3", id="min"),
        pytest.param(9, Bounds(1, 8), QUIET, "adaptive: above the maximum of 8", id="max"),
    ],
)
def test_reason(current: int, bounds: Bounds, measured: Measured, reason: str) -> None:
    change = decide(current, bounds, measured, None)
    assert change is not None
    assert change.reason == reason


@pytest.mark.parametrize(
    ("current", "bounds", "measured", "since", "thresholds", "message"),
    [
        pytest.param(0, WIDE, QUIET, None, Thresholds(), "current partitions", id="current-0"),
        pytest.param(-2, WIDE, QUIET, None, Thresholds(), "current partitions", id="current-neg"),
        pytest.param(4, WIDE, rate(-0.1), None, Thresholds(), "enqueue_rate", id="rate-neg"),
        pytest.param(4, WIDE, rate(float("nan")), None, Thresholds(), "enqueue_rate", id="nan"),
        pytest.param(4, WIDE, rate(float("inf")), None, Thresholds(), "enqueue_rate", id="inf"),
        pytest.param(4, WIDE, backlog(-1), None, Thresholds(), "due_backlog", id="backlog-neg"),
        pytest.param(4, WIDE, idle(-1, 0), None, Thresholds(), "dequeues", id="dequeues-neg"),
        pytest.param(4, WIDE, idle(5, -1), None, Thresholds(), "empty_dequeues", id="empty-neg"),
        pytest.param(4, WIDE, idle(5, 6), None, Thresholds(), "cannot exceed", id="empty>calls"),
        pytest.param(4, WIDE, QUIET, float("nan"), Thresholds(), "since_last", id="since-nan"),
        pytest.param(4, Bounds(0, 8), QUIET, None, Thresholds(), "bounds", id="min-0"),
        pytest.param(4, Bounds(9, 8), QUIET, None, Thresholds(), "bounds", id="min>max"),
        pytest.param(4, WIDE, QUIET, None, Thresholds(grow_rate=0), "grow_rate", id="rate-0"),
        pytest.param(
            4, WIDE, QUIET, None, Thresholds(grow_backlog=0), "grow_backlog", id="backlog-0"
        ),
        pytest.param(
            4, WIDE, QUIET, None, Thresholds(shrink_empty_ratio=1.5), "ratio", id="ratio>1"
        ),
        pytest.param(
            4, WIDE, QUIET, None, Thresholds(min_dequeues=0), "min_dequeues", id="min-dequeues-0"
        ),
        pytest.param(
            4, WIDE, QUIET, None, Thresholds(cooldown_s=-1), "cooldown_s", id="cooldown-neg"
        ),
    ],
)
def test_refuses(
    current: int,
    bounds: Bounds,
    measured: Measured,
    since: float | None,
    thresholds: Thresholds,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        decide(current, bounds, measured, since, thresholds)


# Properties. Counts and loads in ranges where every rule fires often: loads around the
# thresholds times the counts, dequeue calls around min_dequeues.


@st.composite
def bounds_st(draw: st.DrawFn) -> Bounds:
    low = draw(st.integers(1, 40))
    return Bounds(low, draw(st.integers(low, 48)))


@st.composite
def thresholds_st(draw: st.DrawFn) -> Thresholds:
    return Thresholds(
        grow_rate=draw(st.floats(0.5, 500.0)),
        grow_backlog=draw(st.integers(1, 2000)),
        shrink_empty_ratio=draw(st.floats(0.0, 1.0)),
        min_dequeues=draw(st.integers(1, 100)),
        cooldown_s=draw(st.floats(0.0, 600.0)),
    )


@st.composite
def measured_st(draw: st.DrawFn, thresholds: Thresholds) -> Measured:
    calls = draw(st.integers(0, 3 * thresholds.min_dequeues))
    return Measured(
        enqueue_rate=draw(st.floats(0.0, 64 * thresholds.grow_rate)),
        due_backlog=draw(st.integers(0, 64 * thresholds.grow_backlog)),
        dequeues=calls,
        empty_dequeues=draw(st.integers(0, calls)),
    )


# current, bounds, measured, since_last_change_s, thresholds: decide's arguments.
Situation = tuple[int, Bounds, Measured, float | None, Thresholds]


@st.composite
def situations(draw: st.DrawFn) -> Situation:
    thresholds = draw(st.one_of(st.just(Thresholds()), thresholds_st()))
    return (
        draw(st.integers(1, 56)),
        draw(bounds_st()),
        draw(measured_st(thresholds)),
        draw(st.one_of(st.none(), st.floats(-10.0, 1000.0))),
        thresholds,
    )


@st.composite
def in_bounds_out_of_cooldown(draw: st.DrawFn) -> Situation:
    _, bounds, measured, _, thresholds = draw(situations())
    current = draw(st.integers(bounds.min, bounds.max))
    return current, bounds, measured, None, thresholds


@given(situations())
def test_the_result_is_within_bounds_and_never_the_current_count(s: Situation) -> None:
    current, bounds, _, _, _ = s
    change = decide(*s)
    if change is not None:
        assert bounds.min <= change.partitions <= bounds.max
        assert change.partitions != current
        assert change.reason.startswith("adaptive: ")
    # Out of bounds always changes, whatever the cooldown says.
    if not bounds.min <= current <= bounds.max:
        assert change is not None


@given(in_bounds_out_of_cooldown())
def test_a_grow_at_most_doubles_and_is_the_smallest_count_enough(s: Situation) -> None:
    current, bounds, measured, _, thresholds = s
    change = decide(*s)
    assume(change is not None and change.partitions > current)
    assert change is not None
    grown = change.partitions
    assert grown <= 2 * current

    def enough(count: int) -> bool:
        return (
            measured.enqueue_rate / count <= thresholds.grow_rate
            and measured.due_backlog / count <= thresholds.grow_backlog
        )

    assert not enough(current)
    # Either the load fits, or the step is as big as a step may be.
    assert enough(grown) or grown == min(2 * current, bounds.max)
    # And no smaller step would have done.
    assert grown == current + 1 or not enough(grown - 1)


@given(situations(), st.floats(0.0, 1.0, exclude_max=True))
def test_within_cooldown_and_bounds_nothing_changes(s: Situation, elapsed: float) -> None:
    _, bounds, measured, _, thresholds = s
    assume(thresholds.cooldown_s > 0)
    since = elapsed * thresholds.cooldown_s
    assume(since < thresholds.cooldown_s)  # the product may round up to the cooldown
    for current in {bounds.min, bounds.max, (bounds.min + bounds.max) // 2}:
        assert decide(current, bounds, measured, since, thresholds) is None


@st.composite
def shrinking(draw: st.DrawFn) -> Situation:
    """Mostly empty dequeues, and loads that may or may not let it shrink."""
    thresholds = draw(st.one_of(st.just(Thresholds()), thresholds_st()))
    assume(thresholds.shrink_empty_ratio < 1)
    bounds = draw(bounds_st())
    calls = draw(st.integers(thresholds.min_dequeues, 3 * thresholds.min_dequeues))
    measured = Measured(
        enqueue_rate=draw(st.floats(0.0, 8 * thresholds.grow_rate)),
        due_backlog=draw(st.integers(0, 8 * thresholds.grow_backlog)),
        dequeues=calls,
        empty_dequeues=calls,
    )
    return draw(st.integers(bounds.min, bounds.max)), bounds, measured, None, thresholds


@given(shrinking())
def test_a_shrink_is_not_grown_back_by_the_same_measurements(s: Situation) -> None:
    current, bounds, measured, _, thresholds = s
    change = decide(*s)
    assume(change is not None and change.partitions < current)
    assert change is not None
    again = decide(change.partitions, bounds, measured, None, thresholds)
    assert again is None or again.partitions < change.partitions
    # The hysteresis margin: the load per partition is at half the grow thresholds or below.
    assert measured.enqueue_rate / change.partitions <= thresholds.grow_rate / 2
    assert 2 * measured.due_backlog <= thresholds.grow_backlog * change.partitions


@given(in_bounds_out_of_cooldown())
def test_a_grow_is_not_shrunk_back_while_no_dequeue_comes_back_empty(s: Situation) -> None:
    current, bounds, measured, _, thresholds = s
    change = decide(*s)
    assume(change is not None and change.partitions > current)
    assert change is not None
    busy = Measured(
        enqueue_rate=measured.enqueue_rate,
        due_backlog=measured.due_backlog,
        dequeues=max(measured.dequeues, thresholds.min_dequeues),
        empty_dequeues=0,
    )
    again = decide(change.partitions, bounds, busy, None, thresholds)
    assert again is None or again.partitions > change.partitions
