"""The client's typed view of PinLater's structs: what you enqueue, what a dequeue
gives you, how you ack and checkpoint, and what a lookup or scan returns."""

from __future__ import annotations

from dataclasses import dataclass

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock

# PinLater's PinLaterJobState, same numbers: the ledger's own (one definition; a test
# checks it against the IDL).
from pinledger.ledger.state import JobState


def now_ms(clock: Clock = SYSTEM_CLOCK) -> int:
    return clock.now_ms()


def after_ms(seconds: float, clock: Clock = SYSTEM_CLOCK) -> int:
    """The `run_after_ms` of a job that should run `seconds` from now."""
    return clock.now_ms() + int(seconds * 1000)


@dataclass(frozen=True, slots=True)
class Job:
    """A job to enqueue. Defaults are PinLater's: priority 1 (the highest), runnable
    now, two attempts."""

    body: bytes
    priority: int = 1
    run_after_ms: int | None = None
    attempts_allowed: int = 2
    custom_status: str = ""
    # A unique job's key: while a job of the queue holds it, enqueueing this one
    # creates nothing and answers the holder's descriptor (decision 0037).
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class DequeuedJob:
    descriptor: str
    body: bytes
    attempts_allowed: int
    attempts_remaining: int
    # W3C traceparent of the attempt this dequeue started, in the job's own trace, when
    # its enqueue was traced.
    traceparent: str | None = None

    @property
    def attempt(self) -> int:
        """1 on the first run; attempts are used up by failures and timeouts."""
        return self.attempts_allowed - self.attempts_remaining + 1

    @property
    def last_attempt(self) -> bool:
        return self.attempts_remaining <= 1


@dataclass(frozen=True, slots=True)
class Ack:
    """One job's ack. `retry_delay_ms` applies to a failure with attempts left."""

    descriptor: str
    append_status: str = ""
    retry_delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A heartbeat, optionally with a new body, a status, a new attempt budget, or a
    move back to PENDING at `run_after_ms` (chained and cron-like jobs)."""

    descriptor: str
    new_body: str | None = None
    move_to_pending: bool = False
    run_after_ms: int | None = None
    attempts_allowed: int | None = None
    prepend_status: str | None = None


@dataclass(frozen=True, slots=True)
class JobInfo:
    descriptor: str
    state: JobState
    attempts_allowed: int
    attempts_remaining: int
    custom_status: str
    created_at_ms: int
    run_after_ms: int | None
    updated_at_ms: int | None
    claim: str | None
    body: bytes | None
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class ScanPage:
    jobs: list[JobInfo]
    continuation: str

    @property
    def more(self) -> bool:
        return self.continuation != "-1"


# JobState is re-exported: the client's job states are the ledger's.
__all__ = [
    "Ack",
    "Checkpoint",
    "DequeuedJob",
    "Job",
    "JobInfo",
    "JobState",
    "ScanPage",
    "after_ms",
    "now_ms",
]
