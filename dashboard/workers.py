"""A queue's workers (issue 42 part 4), linked from its page: which claim sources (the
RequestContext source of the worker that dequeued) hold IN_PROGRESS jobs of the queue,
how many each, and each one's last heartbeat (the latest claim taken or renewed), the
most jobs first. One named query per store (`claim_holders`), at most `SHOWN` sources."""

from __future__ import annotations

from pinledger.dashboard.backend import Backend
from pinledger.dashboard.render import duration, esc, table, url, when
from pinledger.service.api.barrier import settle
from pinledger.service.api.core import load_queue

SHOWN = 200


def workers_page(backend: Backend, name: str) -> str:
    api = backend.api
    queue = load_queue(api, name)
    settle(api, queue)  # claims appended up to now are shown
    now = api.clock.now_ms()
    holders = api.store.claim_holders(queue.name, SHOWN + 1)
    back = f'<p><a href="{esc(url("/queue", name=queue.name))}">back to {esc(queue.name)}</a></p>'
    if not holders:
        return back + '<p class="empty muted">No worker holds a job of this queue now.</p>'
    rows = [
        [
            f'<code data-source="{esc(h.source)}">{esc(h.source or "(no source)")}</code>',
            f'<span data-held="{h.jobs}">{h.jobs:,}</span>',
            esc(when(h.last_heartbeat)),
            esc(duration(max(now - h.last_heartbeat, 0))),
        ]
        for h in holders[:SHOWN]
    ]
    more = (
        f'<p class="muted">The {SHOWN} sources holding the most jobs are shown.</p>'
        if len(holders) > SHOWN
        else ""
    )
    headers = ["claim source", "jobs held (IN_PROGRESS)", "last heartbeat (UTC)", "ago"]
    return back + table(headers, rows, "workers") + more


def link(name: str) -> str:
    """The queue page's link to its workers."""
    return f'<p><a class="workers" href="{esc(url("/workers", queue=name))}">Workers</a></p>'
