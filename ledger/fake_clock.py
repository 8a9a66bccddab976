"""A clock that moves only when a test says so."""

from __future__ import annotations

import threading


class FakeClock:
    """Implements pinledger.ledger.clock.Clock. `advance` moves wall and monotonic time
    together and wakes every sleeper whose deadline has passed; `sleep` returns at once
    when its deadline is already past, so loops under test run without real waits."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._mono = 1000.0
        self._cond = threading.Condition()

    def now_ms(self) -> int:
        with self._cond:
            return self._now_ms

    def monotonic(self) -> float:
        with self._cond:
            return self._mono

    def advance(self, seconds: float) -> None:
        with self._cond:
            self._mono += seconds
            self._now_ms += round(seconds * 1000)
            self._cond.notify_all()

    def sleep(self, seconds: float, interrupt: threading.Event | None = None) -> bool:
        with self._cond:
            deadline = self._mono + seconds
            while self._mono < deadline:
                if interrupt is not None and interrupt.is_set():
                    return True
                # A short real wait, so an interrupt set from another thread (which
                # does not notify this condition) is seen promptly.
                self._cond.wait(0.01)
        return interrupt is not None and interrupt.is_set()


class SkewedClock:
    """One server's view of a FakeClock whose wall clock is off by `skew_s` (negative:
    it lags); monotonic time and sleeps are the FakeClock's."""

    def __init__(self, clock: FakeClock, skew_s: float) -> None:
        self._clock = clock
        self._skew_ms = round(skew_s * 1000)

    def now_ms(self) -> int:
        return self._clock.now_ms() + self._skew_ms

    def monotonic(self) -> float:
        return self._clock.monotonic()

    def sleep(self, seconds: float, interrupt: threading.Event | None = None) -> bool:
        return self._clock.sleep(seconds, interrupt)
