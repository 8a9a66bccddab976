"""The worker's counters: how many handler runs ended with each Outcome, and how many
jobs were handed back at shutdown."""

from __future__ import annotations

from dataclasses import dataclass

from pinledger.client.worker.outcome import RUN_OUTCOMES, Outcome

# The counter of each run outcome (a reschedule is the ledger's RELEASED; the worker's
# own `released` counts the jobs handed back at shutdown).
_FIELD = {
    Outcome.SUCCEEDED: "succeeded",
    Outcome.RETRIED: "retried",
    Outcome.FAILED: "failed",
    Outcome.RELEASED: "rescheduled",
}


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
    # The handler's time, summed over the finished runs counted above.
    handler_seconds: float = 0.0

    def count(self, outcome: Outcome, seconds: float = 0.0) -> None:
        """One more finished run with this outcome, which took the handler `seconds`."""
        self.processed += 1
        self.handler_seconds += seconds
        field = _FIELD.get(outcome)
        if field is None:
            raise ValueError(f"{outcome} is not the outcome of a handler run")
        setattr(self, field, getattr(self, field) + 1)

    def of(self, outcome: Outcome) -> int:
        """The runs that ended with this outcome."""
        return int(getattr(self, _FIELD[outcome]))

    def by_outcome(self) -> dict[str, int]:
        """Each run outcome's count by its word, and `released`."""
        return {**{_FIELD[o]: self.of(o) for o in RUN_OUTCOMES}, "released": self.released}

    def summary(self) -> str:
        """`N processed (N succeeded, N retried, ...), N released`, for the log."""
        each = ", ".join(f"{self.of(o)} {_FIELD[o]}" for o in RUN_OUTCOMES)
        return f"{self.processed} processed ({each}), {self.released} released"


__all__ = ["WorkerCounters"]
