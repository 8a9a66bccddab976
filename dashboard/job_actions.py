"""A job's own buttons on its page (issue 42 parts 3 and 4): Retry (a FAILED job back to
PENDING), Cancel (a PENDING or running job ends FAILED, decision 0036) and Delete, behind
the admin login, each appended to the ledger as retryFailedJobs, cancelJobs and
deleteJobs decide them, with `dashboard:<user>` as the source, so the job's history
shows who did it.

`ACTIONS` is the one list of buttons: a button is its label, the states it is offered
in, and what it appends; the page and the POST route (/job/act) follow it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pinledger.dashboard.backend import Backend
from pinledger.dashboard.render import esc
from pinledger.idl import pinlater
from pinledger.ledger import descriptor
from pinledger.ledger.state import JobState
from pinledger.service.api import bulk, cancel
from pinledger.service.api.core import check_job, load_queue
from pinledger.service.api.requests import Caller, CancelRequest, idl_default

PATH = "/job/act"
# A retried job's attempts, as retryFailedJobs's default.
RETRY_ATTEMPTS = idl_default(pinlater.PinLaterRetryFailedJobsRequest, "attemptsToAllow", int)
# (backend, caller, queue, (partition, local_id), state the job was seen in) -> jobs done
Act = Callable[[Backend, Caller, str, tuple[int, int], JobState], int]


@dataclass(frozen=True, slots=True)
class Action:
    label: str
    states: frozenset[JobState]
    act: Act
    done: str


def _retry(backend: Backend, caller: Caller, queue: str, key: tuple[int, int], _: JobState) -> int:
    return bulk.retry_selected(backend.api, caller, queue, [key], RETRY_ATTEMPTS)


def _delete(
    backend: Backend, caller: Caller, queue: str, key: tuple[int, int], seen: JobState
) -> int:
    # Guarded by the state the page showed: a claim or an ack landing meanwhile wins.
    return bulk.delete_selected(backend.api, caller, queue, seen, [key])


def _cancel(backend: Backend, caller: Caller, queue: str, key: tuple[int, int], _: JobState) -> int:
    # Ends the job FAILED, its worker told at its next checkpoint (decision 0036).
    partition, local_id = key
    found = backend.api.store.lookup(queue, [key], False)
    priority = found[0].job.priority if found else 1
    job = descriptor.JobDescriptor(queue, partition, priority, local_id)
    reason = f"from the dashboard by {caller.source.removeprefix('dashboard:')}"
    return len(cancel.cancel_jobs(backend.api, caller, CancelRequest(queue, (job,), reason)))


ACTIONS: dict[str, Action] = {
    "retry": Action("Retry", frozenset({JobState.FAILED}), _retry, "retried"),
    "delete": Action(
        "Delete",
        frozenset({JobState.PENDING, JobState.FAILED, JobState.SUCCEEDED}),
        _delete,
        "deleted",
    ),
    "cancel": Action(
        "Cancel", frozenset({JobState.PENDING, JobState.IN_PROGRESS}), _cancel, "cancelled"
    ),
}


def _state(backend: Backend, text: str) -> tuple[str, tuple[int, int], JobState | None]:
    api = backend.api
    parsed = descriptor.parse(text)
    queue = load_queue(api, parsed.queue)
    check_job(api, queue, parsed)
    key = (parsed.partition, parsed.local_id)
    found = api.store.lookup(queue.name, [key], False)
    return queue.name, key, found[0].job.state if found else None


def panel(backend: Backend, text: str, user: str | None, csrf: str) -> str:
    """The buttons the job's state offers to an admin; nothing to anyone else."""
    if not user:
        return ""
    _, _, state = _state(backend, text)
    buttons = "".join(
        f'<button name="what" value="{name}" data-action="{name}">{esc(action.label)}</button> '
        for name, action in ACTIONS.items()
        if state in action.states
    )
    if not buttons or state is None:
        return ""
    return (
        f'<form class="inline job-actions" method="post" action="{PATH}">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f'<input type="hidden" name="d" value="{esc(text)}">'
        f'<input type="hidden" name="state" value="{state.name}">{buttons}</form>'
    )


def act(backend: Backend, user: str, text: str, what: str, seen: str) -> str:
    """Do `what` to the job (as seen in state `seen`); returns what the page says."""
    action = ACTIONS.get(what)
    if action is None:
        raise ValueError(f"unknown action {what!r}")
    if seen not in JobState.__members__ or JobState[seen] not in action.states:
        raise ValueError(f"{action.label.lower()} applies to jobs in {_states(action)}")
    queue, key, _ = _state(backend, text)
    caller = Caller(source=f"dashboard:{user}", request_id=uuid.uuid4().hex)
    done = action.act(backend, caller, queue, key, JobState[seen])
    if not done:
        return f"Not {action.done}: the job is no longer {seen} (reload its page)."
    return f"Job {text} {action.done}, as an event in its history with source dashboard:{user}."


def _states(action: Action) -> str:
    return ", ".join(sorted(s.name for s in action.states))
