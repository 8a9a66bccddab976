"""Retry policies: how long a failed job waits before its next attempt.

A policy maps the number of the attempt that just failed (1 for the first run) to the
`retryDelayMillis` of the failure ack, or to None for "do not retry".

    from pinledger.client.retry import constant, exponential, linear, never
    exponential(1, cap_s=300, jitter=0.2)   # ~1 s, ~2 s, ~4 s ... at most 300 s

How attempts and the policy relate: the policy only decides *when* the next attempt
runs. *How many* attempts a job gets is the job's own budget, `attempts_allowed`, set at
enqueue (PinLater's default is 2). A failure ack with attempts left puts the job back to
PENDING, due `delay` ms from now, with one attempt less; the failure of the last attempt
makes the job FAILED whatever the policy says (an operator can `retry_failed` it). A
claim timeout also uses up an attempt, with no delay. `never` makes the first failure
final: the worker first lowers the job's budget to this one attempt (a checkpoint with
numOfAttemptsAllowed=1), so its failure ack moves it to FAILED.

Policies are pure: the same attempt gives the same delay, except for the jitter, whose
random source can be injected (`rng`, a function returning floats in [0, 1)).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

# PinLater's retryDelayMillis is an i64; a delay longer than this is a bug of the caller.
MAX_DELAY_S = 365 * 24 * 3600.0


class RetryPolicy(Protocol):
    """Anything that turns the failed attempt's number into a delay in ms (or None)."""

    def __call__(self, attempt: int) -> int | None: ...


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _check_seconds(name: str, value: float) -> None:
    if not 0 <= value <= MAX_DELAY_S:
        raise ValueError(f"{name} must be between 0 and {MAX_DELAY_S:.0f} seconds, not {value}")


def _check_attempt(attempt: int) -> None:
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, not {attempt}")


@dataclass(frozen=True, slots=True)
class Constant:
    """The same delay after every failure."""

    delay_s: float

    def __post_init__(self) -> None:
        _check_seconds("delay_s", self.delay_s)

    def __call__(self, attempt: int) -> int:
        _check_attempt(attempt)
        return _ms(self.delay_s)


@dataclass(frozen=True, slots=True)
class Linear:
    """`step_s` times the attempt number, at most `cap_s`."""

    step_s: float
    cap_s: float

    def __post_init__(self) -> None:
        _check_seconds("step_s", self.step_s)
        _check_seconds("cap_s", self.cap_s)

    def __call__(self, attempt: int) -> int:
        _check_attempt(attempt)
        return _ms(min(self.step_s * attempt, self.cap_s))


@dataclass(frozen=True, slots=True)
class Exponential:
    """`base_s * factor ** (attempt - 1)`, at most `cap_s`, then lowered by a random
    share of up to `jitter` of itself (0: none, 1: anywhere between 0 and the delay), so
    jobs that failed together do not all come back at the same moment. Jitter only ever
    shortens the delay: the result stays within [0, cap]."""

    base_s: float
    factor: float = 2.0
    cap_s: float = 3600.0
    jitter: float = 0.0
    rng: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_seconds("base_s", self.base_s)
        _check_seconds("cap_s", self.cap_s)
        if not 1 <= self.factor <= 1000:
            raise ValueError(f"factor must be between 1 and 1000, not {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, not {self.jitter}")

    def __call__(self, attempt: int) -> int:
        _check_attempt(attempt)
        delay = min(self._grown(attempt - 1), self.cap_s)
        if self.jitter:
            share = min(max(self.rng(), 0.0), 1.0)
            delay -= delay * self.jitter * share
        return _ms(delay)

    def _grown(self, steps: int) -> float:
        if self.base_s == 0 or self.cap_s == 0 or self.factor == 1:
            return self.base_s
        # Compared in log space: factor ** steps overflows floats long before a
        # realistic attempt number, and past the cap the exact value no longer matters.
        exponent = math.log(self.base_s) + steps * math.log(self.factor)
        if exponent >= math.log(self.cap_s):
            return self.cap_s
        try:
            return float(self.base_s * self.factor**steps)
        except OverflowError:  # a tiny base with a large factor ** steps
            return math.exp(exponent)


@dataclass(frozen=True, slots=True)
class Never:
    """No retry: the first failure is final (see the module text for how)."""

    def __call__(self, attempt: int) -> None:
        _check_attempt(attempt)


def constant(delay_s: float) -> Constant:
    return Constant(delay_s)


def linear(step_s: float, cap_s: float = 3600.0) -> Linear:
    return Linear(step_s, cap_s)


def exponential(
    base_s: float = 1.0,
    factor: float = 2.0,
    cap_s: float = 3600.0,
    jitter: float = 0.0,
    rng: Callable[[], float] = random.random,
) -> Exponential:
    return Exponential(base_s, factor, cap_s, jitter, rng)


never = Never()

__all__ = [
    "Constant",
    "Exponential",
    "Linear",
    "Never",
    "RetryPolicy",
    "constant",
    "exponential",
    "linear",
    "never",
]
