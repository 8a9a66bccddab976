"""Failed jobs grouped by the first line of their last error.

A failing attempt appends a line to the job's custom status (the Worker appends
`attempt 3 failed: ValueError: corrupt image; no attempts left`; any PinLater client may
append its own text), so the last error is the last non-empty line of the status. The
group key drops what differs between jobs failing the same way: the attempt number and
what the worker decided next.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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
