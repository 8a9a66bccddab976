"""A job's history on the wire (getJobHistory): `JobHistory` to Thrift and back.

The steps carry every field of the timeline rows, so a client rebuilds the same
`JobHistory` with `projections.history.build_history` (one implementation of attempts
and snapshots); the attempts and the job are sent too, for clients in other languages.
"""

from __future__ import annotations

import json
from typing import Any

from pinledger.idl import pinlater
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.projections.actions import tag_of_action
from pinledger.projections.history import JobHistory, Step, build_history
from pinledger.projections.store import EventRow


def _step(step: Step) -> Any:
    return pinlater.PinLaterJobHistoryStep(
        offset=step.offset,
        index=step.idx,
        timestampMillis=step.at,
        action=step.action,
        source=step.source,
        requestId=step.request_id,
        server=step.server,
        claimDescriptor=step.claim,
        attempt=step.attempt,
        applied=step.applied,
        reason=step.reason,
        stateAfter=None if step.state_after is None else int(step.state_after),
        attemptsRemainingAfter=step.attempts_remaining_after,
        statusChangeKind=None if step.status_change is None else step.status_change.kind,
        statusChangeText=None if step.status_change is None else step.status_change.text,
        detailJson=json.dumps(step.detail, sort_keys=True),
        traceparent=step.traceparent,
    )


def to_thrift(history: JobHistory) -> Any:
    """The PinLaterJobHistory struct for a history."""
    attempts = [
        pinlater.PinLaterJobAttempt(
            number=a.number,
            claimDescriptor=a.claim,
            claimedAtMillis=a.claimed_at,
            dueAtMillis=a.due_at,
            outcome=a.outcome.value,
            endedAtMillis=a.ended_at,
            queuedMillis=a.queued_ms,
            runningMillis=a.running_ms,
            retryDelayMillis=a.retry_delay_ms,
            timeoutLostMillis=a.timeout_lost_ms,
        )
        for a in history.attempts
    ]
    job = None
    if history.job is not None:
        snap = history.job
        job = pinlater.PinLaterJobInfo(
            jobDescriptor=str(
                JobDescriptor(history.queue, history.partition, snap.priority, history.local_id)
            ),
            jobState=int(snap.state),
            attemptsAllowed=snap.attempts_allowed,
            attemptsRemaining=snap.attempts_remaining,
            customStatus=snap.custom_status,
            createdAtTimestampMillis=snap.created_at,
            runAfterTimestampMillis=snap.run_after,
            updatedAtTimestampMillis=snap.updated_at,
            claimDescriptor=snap.claim,
        )
    return pinlater.PinLaterJobHistory(
        jobDescriptor=history.descriptor,
        steps=[_step(s) for s in history.steps],
        attempts=attempts,
        job=job,
    )


def rows_from_thrift(local_id: int, response: Any) -> list[EventRow]:
    """The timeline rows a PinLaterJobHistory carries."""
    return [
        EventRow(
            local_id=local_id,
            offset=s.offset,
            idx=s.index,
            type=tag_of_action(s.action),
            at=s.timestampMillis,
            source=s.source,
            request_id=s.requestId,
            server=s.server,
            claim=s.claimDescriptor,
            applied=bool(s.applied),
            verdict="applied" if s.applied else f"rejected: {s.reason}",
            state_after=s.stateAfter,
            attempts_remaining_after=s.attemptsRemainingAfter,
            detail=json.loads(s.detailJson or "{}"),
            traceparent=s.traceparent,
        )
        for s in response.steps or []
    ]


def from_thrift(descriptor: JobDescriptor, response: Any) -> JobHistory:
    """The JobHistory a PinLaterJobHistory describes (rebuilt from its steps)."""
    return build_history(descriptor, rows_from_thrift(descriptor.local_id, response))
