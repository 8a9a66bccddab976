"""The worker's counters: how many handler runs ended with each Outcome, and how many
jobs were handed back at shutdown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from pinledger.client.worker.outcome import Outcome


@dataclass(slots=True)
class WorkerCounters:
    """Handler outcomes. `processed` counts every handler run that finished; each
    finished run is exactly one Outcome: succeeded, retried (failed with attempts left:
    it comes back after the policy's delay), failed (failed for good: last attempt or
    the `never` policy) or rescheduled. `released` counts jobs handed back at shutdown."""

    processed: int = 0
    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    rescheduled: int = 0
    released: int = 0

    def count(self, outcome: Outcome) -> None:
        """One more finished run with this outcome."""
        self.processed += 1
        match outcome:
            case Outcome.SUCCEEDED:
                self.succeeded += 1
            case Outcome.RETRIED:
                self.retried += 1
            case Outcome.FAILED:
                self.failed += 1
            case Outcome.RESCHEDULED:
                self.rescheduled += 1
            case _:
                assert_never(outcome)

    def of(self, outcome: Outcome) -> int:
        """The runs that ended with this outcome."""
        return int(getattr(self, outcome.value))

    def summary(self) -> str:
        """`N processed (N succeeded, N retried, ...), N released`, for the log."""
        each = ", ".join(f"{self.of(o)} {o.value}" for o in Outcome)
        return f"{self.processed} processed ({each}), {self.released} released"


__all__ = ["WorkerCounters"]
