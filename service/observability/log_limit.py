"""One log line per event, but not a flood: a noisy kind of event (garbage frames,
refused connections) logs at most `burst` lines per `window_s`, then one line saying
how many more were suppressed."""

from __future__ import annotations

import logging
import threading

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        burst: int = 10,
        window_s: float = 10.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._logger = logger
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start = clock.monotonic()
        self._logged = 0
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        with self._lock:
            now = self._clock.monotonic()
            if now - self._window_start >= self._window_s:
                if self._suppressed:
                    self._logger.warning(
                        "... %d more like the lines above in the last %g s (not logged)",
                        self._suppressed,
                        self._window_s,
                    )
                self._window_start, self._logged, self._suppressed = now, 0, 0
            if self._logged >= self._burst:
                self._suppressed += 1
                return
            self._logged += 1
        self._logger.warning(message, *args)
