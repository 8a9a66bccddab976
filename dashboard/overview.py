"""The first page: every queue at a glance, as Sidekiq's and Oban Web's first pages show
them. Per queue: its jobs by state (due, not yet due, running, failed, succeeded), its
enqueue, completion and failure rates over the last five minutes, the age of its oldest
due job and its rate limit; a totals row under them.

Each queue costs three bounded reads, each on an index: `queue_tally` (five ranges of
jobs_by_state, each count stopping at COUNT_CAP), `event_buckets` (one bucket of the
window, on job_events_by_type) and `oldest_due` (one probe per priority). At most
MAX_QUEUES queues are read per page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pinledger.dashboard.backend import Backend
from pinledger.dashboard.render import duration, esc, url
from pinledger.projections.store import QueueRow, QueueTally

RATE_WINDOW_MS = 5 * 60_000
COUNT_CAP = 10_000
MAX_QUEUES = 200
# The timeline's event tags behind the rates (ledger/codec.py EVENT_TAGS).
ENQUEUED, SUCCEEDED, FAILED = "enq", "ok", "fail"


@dataclass(frozen=True, slots=True)
class QueueLine:
    """One queue's row: counts (each at most the cap), events in the rate window, the
    run_after of its oldest due job (None: none is due), its rate limit."""

    name: str
    tally: QueueTally
    enqueued: int
    succeeded: int
    failed: int
    oldest_due: int | None
    rate_limit: float | None
    # Paused from the catalog (decision 0035).
    paused: bool = False


def per_minute(events: int, window_ms: int) -> str:
    """Events over a window as a rate per minute: one decimal below 10, whole above."""
    rate = events * 60_000 / window_ms
    if rate == 0:
        return "0"
    if rate < 10:
        return f"{rate:.1f}"
    return f"{rate:,.0f}"


def count_text(jobs: int, capped: bool) -> str:
    """A count as the page shows it; a count that reached its cap is a lower bound."""
    return f"{jobs:,}+" if capped else f"{jobs:,}"


def age_text(now: int, oldest_due: int | None) -> str:
    """How long the oldest due job has waited since it became due."""
    return "-" if oldest_due is None else duration(max(now - oldest_due, 0))


def rate_limit_text(limit: float | None) -> str:
    if limit is None:
        return "unlimited"
    if limit == 0:
        return "paused (0 jobs/s)"
    return f"{limit:g} jobs/s"


def _limit_text(line: QueueLine) -> str:
    if line.paused:
        return "paused (pinledger queue pause)"
    return rate_limit_text(line.rate_limit)


def _paused(row: QueueRow | None) -> bool:
    return row is not None and row.paused


def totals(lines: Sequence[QueueLine]) -> tuple[list[tuple[int, bool]], QueueLine]:
    """The totals row: each count with whether any queue's count reached its cap (the
    sum is then a lower bound), and the queues' events summed with the oldest due job
    of all."""
    columns = [[line.tally[i] for line in lines] for i in range(len(QueueTally._fields))]
    counts = [(sum(c), any(n >= COUNT_CAP for n in c)) for c in columns]
    oldest = [line.oldest_due for line in lines if line.oldest_due is not None]
    total = QueueLine(
        name="all queues",
        tally=QueueTally(*(n for n, _ in counts)),
        enqueued=sum(line.enqueued for line in lines),
        succeeded=sum(line.succeeded for line in lines),
        failed=sum(line.failed for line in lines),
        oldest_due=min(oldest, default=None),
        rate_limit=None,
    )
    return counts, total


def read_lines(backend: Backend, names: Sequence[str], now: int) -> list[QueueLine]:
    api = backend.api
    config = api.queue_config()
    since = now - RATE_WINDOW_MS
    lines = []
    for name in names:
        events = {ENQUEUED: 0, SUCCEEDED: 0, FAILED: 0}
        for bucket in api.store.event_buckets(
            name, list(events), since, now + 1, RATE_WINDOW_MS + 1
        ):
            events[bucket.type] += bucket.events
        lines.append(
            QueueLine(
                name=name,
                tally=api.store.queue_tally(name, now, api.config.max_priority, COUNT_CAP),
                enqueued=events[ENQUEUED],
                succeeded=events[SUCCEEDED],
                failed=events[FAILED],
                oldest_due=api.store.oldest_due(name, now, api.config.max_priority),
                rate_limit=config.settings(name).max_jobs_per_second,
                paused=_paused(api.queues.get(name)),
            )
        )
    return lines


# (data-col, heading, what it counts)
_COLUMNS = [
    ("pending", "pending", "PENDING jobs due now"),
    ("later", "later", "PENDING jobs not due yet (run_after in the future)"),
    ("running", "running", "IN_PROGRESS: claimed by a worker"),
    ("failed", "failed", "FAILED for good"),
    ("succeeded", "succeeded", "SUCCEEDED (until garbage collection removes them)"),
    ("enqueued", "enqueued /min", "jobs enqueued per minute, over the last 5 minutes"),
    ("completed", "completed /min", "jobs succeeded per minute, over the last 5 minutes"),
    ("failing", "failed /min", "failed attempts per minute, over the last 5 minutes"),
    ("oldest", "oldest due", "how long the oldest due job has waited since it became due"),
    ("limit", "rate limit", "the queue's dequeue rate limit, or paused"),
]
# QueueTally's fields, in the columns (whose order is the page's, not the tuple's).
_COUNT_COLUMNS = {
    "pending_due": "pending",
    "pending_future": "later",
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
}
# The finder's state behind each count column.
_STATES = {"pending": "PENDING", "running": "IN_PROGRESS", "succeeded": "SUCCEEDED"}


def _row(line: QueueLine, counts: Sequence[tuple[int, bool]], now: int, linked: bool) -> str:
    """One queue's row (`counts` in QueueTally's order, each with whether it is a lower
    bound), or the totals' row (not `linked`)."""
    texts: dict[str, str] = {}
    for (jobs, capped), field in zip(counts, QueueTally._fields, strict=True):
        col = _COUNT_COLUMNS[field]
        text = count_text(jobs, capped)
        if linked and col in _STATES:
            text = f'<a href="{esc(url("/jobs", queue=line.name, state=_STATES[col]))}">{text}</a>'
        elif linked and col == "failed" and jobs:
            text = f'<a href="{esc(url("/failures", queue=line.name))}">{text}</a>'
        texts[col] = text
    texts |= {
        "enqueued": per_minute(line.enqueued, RATE_WINDOW_MS),
        "completed": per_minute(line.succeeded, RATE_WINDOW_MS),
        "failing": per_minute(line.failed, RATE_WINDOW_MS),
        "oldest": esc(age_text(now, line.oldest_due)),
        "limit": esc(_limit_text(line)) if linked else "",
    }
    name = esc(line.name)
    head = f'<a href="{esc(url("/queue", name=line.name))}">{name}</a>' if linked else name
    tds = "".join(
        f'<td class="{"" if col == "limit" else "num"}" data-col="{col}">{texts[col]}</td>'
        for col, _, _ in _COLUMNS
    )
    css = "" if linked else ' class="total"'
    return f'<tr{css} data-queue="{name}"><th scope="row">{head}</th>{tds}</tr>'


def render(lines: Sequence[QueueLine], now: int, more: int = 0) -> str:
    """The overview's table (or what to do when there are no queues yet)."""
    if not lines:
        return (
            '<p class="empty muted">No queues yet. Create one with a createQueue call, or '
            "<code>pinledger client --mode create --queue NAME</code>; it shows here with "
            "its jobs.</p>"
        )
    heads = "".join(
        f'<th class="{"" if col == "limit" else "num"}" title="{esc(title)}">{esc(head)}</th>'
        for col, head, title in _COLUMNS
    )
    body = "".join(
        _row(line, [(n, n >= COUNT_CAP) for n in line.tally], now, True) for line in lines
    )
    counts, total = totals(lines)
    foot = _row(total, counts, now, False)
    note = (
        f'<p class="muted">Rates are per minute over the last {RATE_WINDOW_MS // 60_000} '
        f"minutes. A count stops at {COUNT_CAP:,} (shown {COUNT_CAP:,}+) so the page stays "
        "cheap on a queue of millions; the queue's own page counts everything.</p>"
    )
    cap = f'<p class="muted">The first {len(lines)} queues of {len(lines) + more}.</p>'
    return (
        f'<table class="overview"><thead><tr><th>queue</th>{heads}</tr></thead>'
        f"<tbody>{body}</tbody><tfoot>{foot}</tfoot></table>" + note + (cap if more else "")
    )


def overview(backend: Backend) -> str:
    api = backend.api
    names = [q.name for q in api.store.queues()]
    now = api.clock.now_ms()
    lines = read_lines(backend, names[:MAX_QUEUES], now)
    return render(lines, now, max(len(names) - MAX_QUEUES, 0))
