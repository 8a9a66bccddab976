"""Retry policies: the delays each one gives, table-driven, and their properties (within
[0, cap], growing without jitter, jitter within its share)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.client.retry import (
    MAX_DELAY_S,
    Exponential,
    RetryPolicy,
    constant,
    exponential,
    linear,
    never,
)

attempts = st.integers(min_value=1, max_value=2**31 - 1)
seconds = st.floats(min_value=0, max_value=MAX_DELAY_S, allow_nan=False)
factors = st.floats(min_value=1, max_value=1000, allow_nan=False)
shares = st.floats(min_value=0, max_value=1, allow_nan=False)
# A random source that returns a fixed value, drawn by hypothesis; 0.999... stands in
# for the top of random.random()'s range.
rng_values = st.floats(min_value=0, max_value=1, exclude_max=True, allow_nan=False)


def fixed(value: float) -> Exponential:
    return exponential(1, cap_s=60, jitter=0.5, rng=lambda: value)


@pytest.mark.parametrize(
    ("policy", "expected_ms"),
    [
        (constant(0), [0, 0, 0, 0]),
        (constant(2.5), [2500, 2500, 2500, 2500]),
        (linear(5, cap_s=12), [5000, 10_000, 12_000, 12_000]),
        (linear(0.1, cap_s=3600), [100, 200, 300, 400]),
        (exponential(1, cap_s=5), [1000, 2000, 4000, 5000]),
        (exponential(0.5, factor=3, cap_s=60), [500, 1500, 4500, 13_500]),
        (exponential(2, factor=1, cap_s=60), [2000, 2000, 2000, 2000]),
        (exponential(0, cap_s=60), [0, 0, 0, 0]),
        (exponential(10, cap_s=1), [1000, 1000, 1000, 1000]),
        # jitter with the random source at 0 takes nothing off, at 0.5 a quarter (half of
        # the 0.5 share), at the top of its range almost half.
        (fixed(0.0), [1000, 2000, 4000, 8000]),
        (fixed(0.5), [750, 1500, 3000, 6000]),
        (exponential(4, cap_s=60, jitter=1, rng=lambda: 0.75), [1000, 2000, 4000, 8000]),
        (never, [None, None, None, None]),
    ],
)
def test_delays_of_the_first_four_attempts(
    policy: RetryPolicy, expected_ms: list[int | None]
) -> None:
    assert [policy(attempt) for attempt in (1, 2, 3, 4)] == expected_ms


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: constant(-1), "delay_s must be between 0"),
        (lambda: linear(1, cap_s=-5), "cap_s must be between 0"),
        (lambda: linear(MAX_DELAY_S * 2), "step_s must be between 0"),
        (lambda: exponential(1, factor=0.5), "factor must be between 1 and 1000"),
        (lambda: exponential(1, jitter=1.5), "jitter must be between 0 and 1"),
        (lambda: exponential(1, jitter=-0.1), "jitter must be between 0 and 1"),
    ],
)
def test_bad_settings_are_refused_with_the_setting_named(make: object, message: str) -> None:
    assert callable(make)
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("policy", [constant(1), linear(1), exponential(1), never])
def test_attempt_numbers_start_at_one(policy: RetryPolicy) -> None:
    with pytest.raises(ValueError, match="start at 1"):
        policy(0)


def test_a_huge_attempt_number_gives_the_cap_without_overflowing() -> None:
    assert exponential(0.001, factor=1000, cap_s=7200)(2**31 - 1) == 7_200_000
    assert exponential(1, factor=1.000001, cap_s=60)(2**31 - 1) == 60_000
    assert linear(1, cap_s=60)(2**31 - 1) == 60_000


def test_jitter_uses_the_default_random_source_when_none_is_given() -> None:
    policy = exponential(10, cap_s=10, jitter=1)
    delays = {policy(1) for _ in range(50)}
    assert all(0 <= d <= 10_000 for d in delays)
    assert len(delays) > 1


@given(delay=seconds, attempt=attempts)
def test_constant_is_the_same_for_every_attempt(delay: float, attempt: int) -> None:
    assert constant(delay)(attempt) == constant(delay)(1) == round(delay * 1000)


@given(step=seconds, cap=seconds, attempt=attempts)
def test_linear_stays_within_zero_and_the_cap_and_grows(
    step: float, cap: float, attempt: int
) -> None:
    policy = linear(step, cap)
    assert 0 <= policy(attempt) <= round(cap * 1000)
    assert policy(attempt) <= policy(attempt + 1)


@given(base=seconds, factor=factors, cap=seconds, attempt=attempts)
def test_exponential_without_jitter_stays_within_zero_and_the_cap_and_grows(
    base: float, factor: float, cap: float, attempt: int
) -> None:
    policy = exponential(base, factor, cap)
    assert 0 <= policy(attempt) <= round(cap * 1000)
    assert policy(attempt) <= policy(attempt + 1)


@given(
    base=seconds,
    factor=factors,
    cap=seconds,
    jitter=shares,
    value=rng_values,
    attempt=st.integers(min_value=1, max_value=200),
)
def test_jitter_only_shortens_the_delay_by_at_most_its_share(
    base: float, factor: float, cap: float, jitter: float, value: float, attempt: int
) -> None:
    plain = exponential(base, factor, cap)(attempt)
    jittered = exponential(base, factor, cap, jitter, rng=lambda: value)(attempt)
    assert 0 <= jittered <= plain <= round(cap * 1000)
    # rounding to whole ms can move either side by half a ms
    assert jittered >= plain * (1 - jitter) - 1


@given(value=st.floats(allow_nan=False), attempt=st.integers(min_value=1, max_value=50))
def test_a_random_source_outside_zero_and_one_cannot_leave_the_bounds(
    value: float, attempt: int
) -> None:
    delay = exponential(1, cap_s=30, jitter=1, rng=lambda: value)(attempt)
    assert 0 <= delay <= 30_000


@given(attempt=attempts)
def test_never_retries(attempt: int) -> None:
    policy: RetryPolicy = never
    assert policy(attempt) is None
