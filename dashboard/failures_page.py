"""The failures: FAILED jobs grouped by the first line of their last error, in one queue
or across all queues, and, in one queue, the bulk retry and delete of a selection or of
everything matching a filter (after login, with a confirmation that says how many jobs
it touches)."""

from __future__ import annotations

import uuid

from pinledger.dashboard import paging
from pinledger.dashboard.backend import Backend
from pinledger.dashboard.failures import error_key, group_across_queues, group_failures
from pinledger.dashboard.render import esc, table, url, when
from pinledger.ledger import descriptor
from pinledger.ledger.state import JobState
from pinledger.projections.store import JobRow, JobSearch
from pinledger.service.api import bulk
from pinledger.service.api.barrier import settle
from pinledger.service.api.core import load_queue
from pinledger.service.api.requests import Caller

# The newest failed jobs a page groups, and the most one action touches.
GROUPED = 1000
MAX_ACTION = 10_000
_READ = 1000
# Across all queues: the first queues by name, each giving an equal share of GROUPED
# (at least PER_QUEUE_MIN): at most max(GROUPED, PER_QUEUE_MIN * ALL_QUEUES) rows.
ALL_QUEUES = 200
PER_QUEUE_MIN = 10
SHOWN = 20  # jobs listed per group


def matching(
    backend: Backend, queue: str, priority: int | None, error: str, cap: int
) -> list[JobRow]:
    """FAILED jobs of `queue` (one priority or all) whose error key is `error` (every
    one when empty), newest first, at most `cap`: keyset pages of the finder."""
    found: list[JobRow] = []
    after = None
    search = JobSearch(queue, JobState.FAILED, priority)
    while len(found) < cap:
        rows = backend.api.store.find_jobs(search, after, _READ)
        found.extend(r for r in rows if not error or error_key(r.job.custom_status) == error)
        if len(rows) < _READ:
            break
        after = paging.parse_token(paging.token_after(rows[-1]))
    return found[:cap]


def _descriptor(queue: str, row: JobRow) -> str:
    return str(descriptor.JobDescriptor(queue, row.partition, row.job.priority, row.job.local_id))


def overview(backend: Backend, queue_name: str, priority: str, user: str | None, csrf: str) -> str:
    api = backend.api
    queues = [q.name for q in api.store.queues()]
    options = '<option value="">all queues</option>' + "".join(
        f"<option{' selected' if q == queue_name else ''}>{esc(q)}</option>" for q in queues
    )
    form = (
        '<form class="filters" method="get" action="/failures">'
        f'<label>queue<select name="queue">{options}</select></label>'
        "<label>priority (empty: all)"
        f'<input name="priority" size="3" value="{esc(priority)}"></label>'
        "<button>Show</button></form>"
    )
    p = int(priority) if priority else None
    if not queue_name:
        return form + across_queues(backend, queues, p)
    queue = load_queue(api, queue_name)
    settle(api, queue)
    rows = api.store.find_jobs(JobSearch(queue.name, JobState.FAILED, p), None, GROUPED)
    groups = group_failures(rows)
    note = (
        f'<p class="muted">The newest {len(rows):,} failed jobs'
        + (f" (the first {GROUPED:,})" if len(rows) == GROUPED else "")
        + ", grouped by the first line of their last error.</p>"
    )
    if not user:
        note += (
            '<p class="notice">Read-only: <a href="/login">log in</a> with the admin '
            "password to retry or delete.</p>"
        )
    parts = [form, note]
    for index, group in enumerate(groups):
        jobs = []
        for row in group.jobs[:SHOWN]:
            d = _descriptor(queue.name, row)
            box = f'<input type="checkbox" name="job" value="{esc(d)}"> ' if user else ""
            jobs.append(
                [
                    f'{box}<a href="{esc(url("/job", d=d))}"><code>{esc(d)}</code></a>',
                    esc(when(row.job.updated_at)),
                ]
            )
        more = (
            f'<p class="muted">and {group.count - SHOWN:,} more</p>' if group.count > SHOWN else ""
        )
        actions = ""
        if user:
            actions = (
                f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
                f'<input type="hidden" name="queue" value="{esc(queue.name)}">'
                f'<input type="hidden" name="priority" value="{esc(priority)}">'
                f'<input type="hidden" name="error" value="{esc(group.error)}">'
                '<button name="what" value="retry-selected">Retry selected</button> '
                '<button name="what" value="delete-selected">Delete selected</button> '
                '<button name="what" value="retry-all">Retry all matching</button> '
                '<button name="what" value="delete-all">Delete all matching</button>'
            )
        parts.append(
            f'<form class="card group" data-group="{index}" method="post" '
            'action="/failures/confirm">'
            f'<h2><span class="count">{group.count:,}</span> jobs: '
            f"<code>{esc(group.error)}</code></h2>"
            + table(["job", "failed at (UTC)"], jobs, "failed")
            + more
            + actions
            + "</form>"
        )
    if not groups:
        parts.append('<p class="muted">No failed jobs.</p>')
    return "".join(parts)


def across_queues(backend: Backend, queues: list[str], priority: int | None) -> str:
    """The newest failed jobs of every queue (a bounded share of each), grouped by error
    alone: one error failing jobs in several queues is one group, with its count in each
    queue. Read-only: the actions are on each queue's own page, linked from the group."""
    store = backend.api.store
    shown = queues[:ALL_QUEUES]
    share = max(GROUPED // max(len(shown), 1), PER_QUEUE_MIN)
    rows = {q: store.find_jobs(JobSearch(q, JobState.FAILED, priority), None, share) for q in shown}
    read = sum(len(r) for r in rows.values())
    full = [q for q, r in rows.items() if len(r) == share]
    groups = group_across_queues(rows)
    scope = (
        f"the first {len(shown)} of {len(queues)} queues"
        if len(queues) > ALL_QUEUES
        else "all queues"
    )
    capped = f"; {len(full)} queues may have more" if full else ""
    parts = [
        f'<p class="muted all-queues" data-jobs="{read}">The newest {read:,} failed jobs of '
        f"{scope} (at most {share:,} per queue{capped}), grouped by the first line of their "
        "last error. Open a queue to retry or delete its failed jobs.</p>"
    ]
    for index, group in enumerate(groups):
        spread = ", ".join(
            f'<a href="{esc(url("/failures", queue=q))}" data-queue="{esc(q)}">{esc(q)}</a> '
            f'<span class="count">{n:,}</span>'
            for q, n in group.queues()
        )
        jobs = [
            [
                esc(q),
                f'<a href="{esc(url("/job", d=_descriptor(q, row)))}">'
                f"<code>{esc(_descriptor(q, row))}</code></a>",
                esc(when(row.job.updated_at)),
            ]
            for q, row in group.jobs[:SHOWN]
        ]
        more = (
            f'<p class="muted">and {group.count - SHOWN:,} more</p>' if group.count > SHOWN else ""
        )
        parts.append(
            f'<div class="card group across" data-group="{index}">'
            f'<h2><span class="count">{group.count:,}</span> jobs: '
            f"<code>{esc(group.error)}</code></h2>"
            f'<p class="queues">in {spread}</p>'
            + table(["queue", "job", "failed at (UTC)"], jobs, "failed")
            + more
            + "</div>"
        )
    if not groups:
        parts.append('<p class="muted">No failed jobs.</p>')
    return "".join(parts)


def selection(
    backend: Backend, what: str, queue: str, priority: str, error: str, chosen: list[str]
) -> list[tuple[int, int]]:
    """The (partition, local_id) of the jobs an action touches."""
    if what.endswith("-selected"):
        keys = []
        for text in chosen:
            parsed = descriptor.parse(text)
            if parsed.queue != queue:
                raise ValueError(f"{text} is not a job of queue {queue!r}")
            keys.append((parsed.partition, parsed.local_id))
        return keys[:MAX_ACTION]
    rows = matching(backend, queue, int(priority) if priority else None, error, MAX_ACTION)
    return [(r.partition, r.job.local_id) for r in rows]


def confirm(
    backend: Backend, what: str, queue: str, priority: str, error: str, chosen: list[str], csrf: str
) -> str:
    keys = selection(backend, what, queue, priority, error, chosen)
    verb = "Retry" if what.startswith("retry") else "Delete"
    hidden = "".join(
        f'<input type="hidden" name="{n}" value="{esc(v)}">'
        for n, v in [
            ("csrf", csrf),
            ("what", what),
            ("queue", queue),
            ("priority", priority),
            ("error", error),
        ]
    ) + "".join(f'<input type="hidden" name="job" value="{esc(c)}">' for c in chosen)
    cap = f" (the most one action touches is {MAX_ACTION:,})" if len(keys) == MAX_ACTION else ""
    return (
        f'<form class="card confirm" method="post" action="/failures/act">{hidden}'
        f'<p>{verb} <b class="touches" data-jobs="{len(keys)}">{len(keys):,}</b> failed jobs of '
        f"queue <code>{esc(queue)}</code>{cap}?</p>"
        f'<button name="confirmed" value="yes">{verb} {len(keys):,} jobs</button> '
        f'<a href="{esc(url("/failures", queue=queue, priority=priority))}">cancel</a></form>'
    )


def act(
    backend: Backend,
    user: str,
    what: str,
    queue: str,
    priority: str,
    error: str,
    chosen: list[str],
    attempts: int = 1,
) -> int:
    """Retry or delete; the events carry `dashboard:<user>` as their source."""
    keys = selection(backend, what, queue, priority, error, chosen)
    caller = Caller(source=f"dashboard:{user}", request_id=uuid.uuid4().hex)
    if what.startswith("retry"):
        return bulk.retry_selected(backend.api, caller, queue, keys, attempts)
    return bulk.delete_selected(backend.api, caller, queue, JobState.FAILED, keys)
