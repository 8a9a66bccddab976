"""A queue's periodic jobs on its page (decision 0038): each schedule the queue config
lists, how it is written, its last tick with the job it enqueued (linked), and its next."""

from __future__ import annotations

from pinledger.dashboard.backend import Backend
from pinledger.dashboard.render import esc, table, url, when
from pinledger.service.schedules.listing import schedule_lines


def section(backend: Backend, queue: str) -> str:
    """The queue page's schedules table, or nothing when the queue has none."""
    api = backend.api
    now = api.clock.now_ms()
    lines = [
        line
        for line in schedule_lines(
            api.queue_config(), api.store.schedule_ticks(queue), [queue], now
        )
        if line.queue == queue
    ]
    if not lines:
        return ""
    rows = []
    for line in lines:
        job = (
            f'<a href="{esc(url("/job", d=line.last_job))}">{esc(line.last_job)}</a>'
            if line.last_job
            else "-"
        )
        rows.append(
            [
                f'<span data-schedule="{esc(line.name)}">{esc(line.name)}</span>',
                esc(line.when or "not in the queue config"),
                esc(when(line.last_ms) if line.last_ms is not None else "never"),
                job,
                esc(when(line.next_ms)),
            ]
        )
    headers = ["schedule", "when", "last tick (UTC)", "its job", "next tick (UTC)"]
    return "<h2>Schedules</h2>" + table(headers, rows, "schedules")
