"""The queues: one queue's counts, rates, oldest due job, rate limit, paused
and draining partitions and owners, its resizes, and a queue as it was at a past
moment."""

from __future__ import annotations

from pinledger.dashboard.backend import Backend
from pinledger.dashboard.overview import rate_limit_text
from pinledger.dashboard.render import duration, esc, table, url, when
from pinledger.dashboard.svg import sparkline
from pinledger.ledger.events import PartitionsRetired, QueueResized
from pinledger.ledger.log import queue_topic
from pinledger.ledger.state import JobState
from pinledger.ledger.times import parse_ms
from pinledger.projections.catalog_log import catalog_envelopes, resizes
from pinledger.projections.store import QueueRow
from pinledger.service.api.barrier import settle
from pinledger.service.api.core import load_queue

RATE_WINDOW_MS = 3600_000
RATE_BUCKET_MS = 60_000
MEMBER_PREFIX = "pinledger@"  # members of the owners' group are named after servers
RESIZES_SHOWN = 20


def queue_detail(backend: Backend, name: str) -> str:
    api = backend.api
    queue = load_queue(api, name)
    settle(api, queue)  # as getJobCount: counts of everything in the log as of now
    now = api.clock.now_ms()
    return "".join(
        [
            _summary(backend, queue, now),
            _counts(backend, queue, now),
            _partitions(backend, queue),
            _resizes(backend, queue),
        ]
    )


def _summary(backend: Backend, queue: QueueRow, now: int) -> str:
    api = backend.api
    since = now - RATE_WINDOW_MS
    buckets = api.store.event_buckets(queue.name, ["enq", "ok"], since, now, RATE_BUCKET_MS)
    series = {"enq": [0] * (RATE_WINDOW_MS // RATE_BUCKET_MS), "ok": [0] * 60}
    for bucket in buckets:
        index = (bucket.start - since) // RATE_BUCKET_MS
        if 0 <= index < len(series[bucket.type]):
            series[bucket.type][index] += bucket.events
    oldest = api.store.oldest_due(queue.name, now, api.config.max_priority)
    age = "no job is due" if oldest is None else duration(now - oldest)
    settings = api.queue_config().settings(queue.name)
    cards = [
        ("enqueued, last hour", f"{sum(series['enq']):,}", sparkline(series["enq"], label="enq")),
        ("succeeded, last hour", f"{sum(series['ok']):,}", sparkline(series["ok"], label="ok")),
        ("oldest due job waiting", esc(age), ""),
        ("rate limit", esc(rate_limit_text(settings.max_jobs_per_second)), ""),
        ("created (UTC)", esc(when(queue.created_at)), ""),
    ]
    return (
        '<div class="grid">'
        + "".join(
            f'<div class="card" data-card="{esc(title)}"><div class="muted">{esc(title)}</div>'
            f'<div class="big">{value}</div>{extra}</div>'
            for title, value, extra in cards
        )
        + "</div>"
    )


def _counts(backend: Backend, queue: QueueRow, now: int) -> str:
    api = backend.api
    counts: dict[tuple[JobState, int], list[int]] = {}
    for row in api.store.counts_as_of(queue.name, now):
        counts.setdefault((row.state, row.priority), [0, 0])[int(row.future)] += row.jobs
    priorities = range(1, api.config.max_priority + 1)
    rows = []
    for state in JobState:
        cells = [f"<b>{state.name}</b>"]
        total = 0
        for p in priorities:
            due, future = counts.get((state, p), [0, 0])
            total += due + future
            link = url("/jobs", queue=queue.name, state=state.name, priority=p)
            text = f"{due + future:,}" + (
                f' <span class="muted">({future:,} later)</span>' if future else ""
            )
            cells.append(
                f'<a href="{esc(link)}" data-state="{state.name}" data-priority="{p}">{text}</a>'
            )
        cells.append(f'<span data-total="{state.name}">{total:,}</span>')
        rows.append(cells)
    headers = ["state", *(f"priority {p}" for p in priorities), "total"]
    return "<h2>Jobs by state and priority</h2>" + table(headers, rows, "counts")


def _partitions(backend: Backend, queue: QueueRow) -> str:
    api = backend.api
    topic = queue_topic(api.config.topic_prefix, queue.name)
    owners: dict[int, str] = {}
    try:
        for member in backend.owners():
            for t, p in member.partitions:
                if t == topic:
                    owners[p] = member.member_id.removeprefix(MEMBER_PREFIX)
    except Exception as exc:  # the page still shows the rest when Kafka does not answer
        return f'<p class="error">Owners unknown: {esc(exc)}</p>'
    settings = api.queue_config().settings(queue.name)
    paused = settings.max_jobs_per_second == 0 or queue.paused
    rows = []
    for p in range(queue.partitions):
        state = []
        if queue.state_of(p) == "retired":
            state.append("retired (drained and empty; reused when the queue grows)")
        elif p >= queue.open:
            state.append("draining (the queue was resized to fewer partitions)")
        elif p in settings.drained_partitions:
            state.append("draining (no new enqueues)")
        if paused:
            state.append("paused")
        rows.append(
            [str(p), esc(owners.get(p, "none (being moved)")), esc(", ".join(state) or "serving")]
        )
    return "<h2>Partitions</h2>" + table(["partition", "owner", "state"], rows, "partitions")


def as_of_page(backend: Backend, name: str, at_text: str, a: str = "", b: str = "") -> str:
    api = backend.api
    form = (
        '<form class="filters" method="get" action="/asof">'
        f'<label>queue<input name="queue" value="{esc(name)}" required></label>'
        f'<label>time (UTC, ISO-8601 or ms)<input name="at" value="{esc(at_text)}" required>'
        "</label>"
        f'<label>why is job<input name="a" value="{esc(a)}" placeholder="descriptor"></label>'
        f'<label>dequeued before<input name="b" value="{esc(b)}" placeholder="descriptor">'
        "</label><button>Show</button></form>"
    )
    if not name or not at_text:
        return form + '<p class="muted">Rebuilds the queue from its log up to that moment.</p>'
    at = parse_ms(at_text)
    queue = load_queue(api, name)
    pair = [a.strip(), b.strip()] if a.strip() and b.strip() else []
    state = backend.as_of(queue.name, at, 50, pair)
    rows = [
        [esc(c.state.name), str(c.priority), f"{c.due:,}", f"{c.future:,}"] for c in state.counts
    ]
    due = [
        [
            str(i + 1),
            f'<a href="{esc(url("/job", d=j.descriptor))}"><code>{esc(j.descriptor)}</code></a>',
            str(j.priority),
            esc(when(j.run_after)),
        ]
        for i, j in enumerate(state.due)
    ]
    return (
        form
        + f"<h2>{esc(queue.name)} as of {esc(when(at))} UTC</h2>"
        + (f'<p class="why">{esc(state.why)}</p>' if state.why else "")
        + table(["state", "priority", "due", "not yet due"], rows, "asof-counts")
        + "<h2>Waiting, in the order a dequeue takes them</h2>"
        + '<p class="muted">Priority first (1 is highest), then the earlier run_after, then '
        "the earlier place in the partition's log.</p>"
        + table(["#", "job", "priority", "due since (UTC)"], due, "asof-due")
    )


def _resizes(backend: Backend, queue: QueueRow) -> str:
    """When and why the queue was resized (the catalog's records, read from the log)."""
    api = backend.api
    try:
        found = resizes(catalog_envelopes(api.writer.log, api.config.topic_prefix), queue.name)
    except Exception as exc:  # the page still shows the rest when Kafka does not answer
        return f'<h2>Resizes</h2><p class="error">Resizes unknown: {esc(exc)}</p>'
    if not found:
        return ""
    rows = [
        [
            esc(when(envelope.at)),
            esc(_change(event, partitions)),
            esc(event.reason or "-"),
            esc(envelope.actor.source),
        ]
        for envelope, event, partitions in reversed(found[-RESIZES_SHOWN:])
    ]
    return "<h2>Resizes</h2>" + table(["when (UTC)", "change", "why", "by"], rows, "resizes")


def _change(event: QueueResized | PartitionsRetired, partitions: int) -> str:
    """What a record changed, told with the partitions the queue had then."""
    if isinstance(event, QueueResized):
        return f"takes jobs on {event.partitions} partition(s)"
    if event.first >= partitions:
        return "retirement undone"
    return f"partitions {event.first}..{partitions - 1} retired"
