"""A queue's Pause and Resume buttons (issue 42 part 4, decision 0035): the queue page
shows whether the queue is paused from the catalog and, to a logged-in admin, the
button that changes it. The POST appends a `QueuePaused` record to the catalog with the
admin as its source (`dashboard:<user>`), as `pinledger queue pause|resume` does; every
server reads it within about a second."""

from __future__ import annotations

import socket

from pinledger.dashboard.backend import Backend
from pinledger.dashboard.render import esc
from pinledger.ledger.events import Actor, QueuePaused
from pinledger.projections.skips import REASON_CHARS
from pinledger.projections.store import QueueRow
from pinledger.service.api.core import load_queue

PATH = "/queue/pause"


def panel(queue: QueueRow, user: str | None, csrf: str) -> str:
    """The queue's pause state and, for an admin, the form that flips it."""
    state = (
        '<p class="notice paused" data-paused="yes">Paused: dequeues hand out none of this '
        "queue's jobs on any server; enqueues go on.</p>"
        if queue.paused
        else '<p class="muted" data-paused="no">Not paused.</p>'
    )
    if not user:
        return state + '<p class="muted"><a href="/login">Log in</a> to pause or resume it.</p>'
    verb = "Resume" if queue.paused else "Pause"
    return (
        state + f'<form class="inline pause" method="post" action="{PATH}">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f'<input type="hidden" name="name" value="{esc(queue.name)}">'
        f'<input type="hidden" name="paused" value="{"no" if queue.paused else "yes"}">'
        f'<label>reason <input name="reason" maxlength="{REASON_CHARS}"></label> '
        f'<button data-action="{verb.lower()}">{verb}</button></form>'
    )


def set_paused(backend: Backend, user: str, name: str, paused: bool, reason: str) -> str:
    """Append the pause or resume; returns what the page says. ValueError (a bad reason,
    a cluster whose ledger format has no pauses: FormatTooOldError) for what is refused."""
    api = backend.api
    queue = load_queue(api, name)
    if "\x00" in reason or len(reason) > REASON_CHARS:
        raise ValueError(f"give a reason of at most {REASON_CHARS} characters")
    if queue.paused == paused:
        return f"Queue {queue.name} is {'paused' if paused else 'not paused'} already."
    actor = Actor(source=f"dashboard:{user}", server=socket.gethostname())
    api.writer.pause_queue(QueuePaused(queue.name, paused, reason), api.clock.now_ms(), actor)
    done = "paused" if paused else "resumed"
    return (
        f"Queue {queue.name} {done}, as a record in the catalog with source "
        f"dashboard:{user}; every server reads it within seconds."
    )
