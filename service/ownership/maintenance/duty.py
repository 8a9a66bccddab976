"""What a periodic duty is to the scheduler (scheduler.py), as a maintenance service is
to River's queue maintainer: a name, a schedule, a run, and where it runs.

A duty does its work in `run(now_ms)`, handed the scheduler's wall-clock time, and
raises when it could not; the scheduler logs, backs off and tries again, so a duty
holds no loop, no thread and no retry of its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar


class Scope(Enum):
    """Which servers do a duty's work."""

    # Each server, for its own partitions or its own view (timeouts, the members list).
    EVERY_SERVER = "every server"
    # One server for the cluster: the owner of the catalog's partition. Every server
    # schedules the duty; on the others it stands by (`Duty.stand_by`), so that a
    # failover hands it to the new catalog owner within one interval.
    CATALOG_OWNER = "the catalog's owner"


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a duty runs: every `every_s` seconds (monotonic, counted from the end of the
    lane's round it last ran in), the first run at once or one interval after the lane
    starts. After a failure it runs again after `retry_s`, doubling with each failure in
    a row up to `every_s` (None: after `every_s`, as after a run that worked)."""

    every_s: float
    at_once: bool = False
    retry_s: float | None = None

    def after(self, failures_in_a_row: int) -> float:
        """Seconds until the next run, after a run that left this many failures in a
        row (0: it worked)."""
        if failures_in_a_row == 0 or self.retry_s is None:
            return self.every_s
        return float(min(self.retry_s * 2.0 ** (failures_in_a_row - 1), self.every_s))


class Duty(ABC):
    """One periodic duty. `name` names it in the log and in the scheduler's health
    (lower case, dashes); `scope` says which servers do its work."""

    name: ClassVar[str]
    scope: ClassVar[Scope] = Scope.EVERY_SERVER
    schedule: Schedule

    @abstractmethod
    def run(self, now_ms: int) -> object:
        """Do the work due at `now_ms` (wall clock); raise when it could not."""

    # Not abstract: most duties keep nothing that only the catalog's owner needs.
    def stand_by(self) -> None:  # noqa: B027
        """A CATALOG_OWNER duty's turn on a server that does not own the catalog: drop
        what only the catalog's owner keeps (nothing, unless the duty says)."""
