"""The one clock of the runtime: wall time for events, monotonic time for waits.

Domain code (the state machine, decide) never reads a clock: it is handed `now`.
The runtime around it (owners, handlers, maintenance loops, the worker) reads time
only through a Clock, so tests drive claim timeouts, GC, rebalances and adoption with
a FakeClock (pinledger.service.testing) in milliseconds instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Wall time in epoch milliseconds (what events record), monotonic seconds (what
    timeouts and intervals measure), and a sleep that a fake clock can skip."""

    def now_ms(self) -> int:
        """Wall-clock time, epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    def sleep(self, seconds: float, interrupt: threading.Event | None = None) -> bool:
        """Wait `seconds`, or until `interrupt` is set; True if it was set."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, interrupt: threading.Event | None = None) -> bool:
        if interrupt is not None:
            return interrupt.wait(max(0.0, seconds))
        time.sleep(max(0.0, seconds))
        return False


SYSTEM_CLOCK = SystemClock()
