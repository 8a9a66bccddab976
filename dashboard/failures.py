"""Failed jobs grouped by the first line of their last error, in one queue or across
queues.

A failing attempt appends a line to the job's custom status (the Worker appends
`attempt 3 failed: ValueError: corrupt image; no attempts left`; any PinLater client may
append its own text), so the last error is the last non-empty line of the status. The
group key drops what differs between jobs failing the same way: the attempt number and
what the worker decided next.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pinledger.projections.store import JobRow

NO_ERROR = "(no error text)"
_ATTEMPT = re.compile(r"^attempt \d+ failed: ")
_DECISION = re.compile(r"; (no attempts left|not retried \(.*\)|retry in [^;]*)$")


def error_key(custom_status: str) -> str:
    """The first line of the job's last error, without the attempt number and the
    worker's decision."""
    lines = [line.strip() for line in custom_status.splitlines() if line.strip()]
    if not lines:
        return NO_ERROR
    return _DECISION.sub("", _ATTEMPT.sub("", lines[-1])) or NO_ERROR


@dataclass
class FailureGroup:
    error: str
    jobs: list[JobRow] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.jobs)


def group_failures(rows: Iterable[JobRow]) -> list[FailureGroup]:
    """Groups by error key, the largest first (then by error text)."""
    groups: dict[str, FailureGroup] = {}
    for row in rows:
        key = error_key(row.job.custom_status)
        groups.setdefault(key, FailureGroup(key)).jobs.append(row)
    return sorted(groups.values(), key=lambda g: (-g.count, g.error))


@dataclass
class CrossGroup:
    """Failed jobs of several queues with one error key."""

    error: str
    jobs: list[tuple[str, JobRow]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.jobs)

    def queues(self) -> list[tuple[str, int]]:
        """(queue, jobs of this group in it), the most first (then by name)."""
        counts = Counter(queue for queue, _ in self.jobs)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def group_across_queues(rows: Mapping[str, Sequence[JobRow]]) -> list[CrossGroup]:
    """Failed jobs of many queues (by queue name) grouped by error key alone, so one
    error failing jobs in several queues is one group; the largest first (then by error
    text), each group's jobs the last failed first (then by queue, partition, id)."""
    groups: dict[str, CrossGroup] = {}
    for queue, queue_rows in rows.items():
        for row in queue_rows:
            key = error_key(row.job.custom_status)
            groups.setdefault(key, CrossGroup(key)).jobs.append((queue, row))
    for group in groups.values():
        group.jobs.sort(
            key=lambda j: (-j[1].job.updated_at, j[0], j[1].partition, j[1].job.local_id)
        )
    return sorted(groups.values(), key=lambda g: (-g.count, g.error))
