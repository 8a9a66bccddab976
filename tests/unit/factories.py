"""Plain builders for jobs and stamps, so a test states only what it is about."""

from __future__ import annotations

from typing import Any

from pinledger.ledger.events import Actor
from pinledger.ledger.state import Job, JobState, Stamp

NOW = 1_700_000_000_000
WORKER = "worker:host-a"
OTHER_WORKER = "worker:host-b"
CLAIM = "pinledger-1:1700000000000:worker:host-a:7"
OTHER_CLAIM = "pinledger-1:1700000000000:worker:host-b:8"
CLAIMED_AT = NOW - 60_000


def stamp(at: int = NOW, source: str = WORKER) -> Stamp:
    return Stamp(at=at, actor=Actor(source=source, request_id="req-1", server="pinledger-1"))


def make_job(state: JobState = JobState.PENDING, **changes: Any) -> Job:
    """A consistent job in `state`: three attempts allowed, two left; IN_PROGRESS jobs are
    claimed by WORKER under CLAIM since CLAIMED_AT. Keyword arguments override fields."""
    in_progress = state is JobState.IN_PROGRESS
    fields: dict[str, Any] = {
        "local_id": 7000,
        "priority": 1,
        "state": state,
        "body": b"payload",
        "attempts_allowed": 3,
        "attempts_remaining": 0 if state is JobState.FAILED else 2,
        "custom_status": "status",
        "created_at": NOW - 3_600_000,
        "run_after": NOW - 120_000,
        "updated_at": CLAIMED_AT if in_progress else NOW - 120_000,
        "claim": CLAIM if in_progress else None,
        "claim_source": WORKER if in_progress else None,
        "touched_at": CLAIMED_AT if in_progress else None,
    }
    fields.update(changes)
    return Job(**fields)
