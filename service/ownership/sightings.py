"""What an owner saw of its partitions' claims, by its own clock (owner thread writes,
under the partitions' lock; the claim timeouts read, under it too).

A job's `touched_at` is the time of the record that made or last renewed its claim, by
the clock of whichever server took that call. A server whose clock lags by about the
claim timeout would make every owner time out the claims heartbeated through it. So the
owner also notes when, by its own monotonic clock, it projected each claim or an
applied checkpoint of it, and a claim times out only once both are past the timeout
(maintenance/claim_timeouts.py).

Memory: one entry per IN_PROGRESS job the owner saw touched, dropped when the job leaves
IN_PROGRESS. A claim it saw no touch of (made before the partition was assigned here)
counts from the assignment: a new owner gives every claim it finds a full timeout, since
it cannot tell a lagging stamp from a dead worker; what that costs is a dead worker's
job retried up to one timeout later after a failover. The sightings of a partition
outlive the owner's reloads of it (a failed pass, a store shard's pause, a move), and go
when the partition is assigned elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pinledger.ledger.events import Checkpointed, Claimed
from pinledger.ledger.state import JobState
from pinledger.projections.projector import Transition


def elapsed_ms(since: float, now: float) -> int:
    """Whole milliseconds between two monotonic times, as touched_at counts them (a
    float difference lands a hair under a whole one)."""
    return round((now - since) * 1000)


@dataclass(slots=True)
class Sightings:
    # When the partition was assigned to this server (monotonic seconds).
    since: float
    # local_id -> when this owner last projected its claim or an applied checkpoint.
    touched: dict[int, float] = field(default_factory=dict)

    def note(self, transitions: Sequence[Transition], now: float) -> None:
        """A projected batch's transitions, seen at `now`."""
        for t in transitions:
            if t.after is None or t.after.state is not JobState.IN_PROGRESS:
                self.touched.pop(t.local_id, None)
            elif isinstance(t.event, Claimed | Checkpointed) and t.verdict.applied:
                self.touched[t.local_id] = now

    def recent(self, now: float, timeout_ms: int) -> set[int] | None:
        """The claims seen made or renewed within `timeout_ms` of `now`, which must not
        time out; None when that is every claim (assigned here within it)."""
        if elapsed_ms(self.since, now) < timeout_ms:
            return None
        return {i for i, seen in self.touched.items() if elapsed_ms(seen, now) < timeout_ms}
