"""Finding jobs (descriptor, body regex, state, priority, custom status; keyset pages)
and a job's life (its history on a time axis, every step, the custom status, the trace
id)."""

from __future__ import annotations

from pinledger.dashboard import paging, svg, timeline
from pinledger.dashboard.backend import Backend
from pinledger.dashboard.render import body_text, duration, esc, table, url, when
from pinledger.ledger import descriptor, limits
from pinledger.ledger.state import JobState
from pinledger.projections.history import JobHistory, build_history
from pinledger.projections.store import JobSearch
from pinledger.service.api.barrier import settle
from pinledger.service.api.core import check_job, load_queue
from pinledger.service.api.reads import history_rows
from pinledger.service.observability import trace_export

PAGE_SIZE = 50


def _options(values: list[str], chosen: str) -> str:
    return "".join(
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v or "any")}</option>'
        for v in values
    )


def search_regex(value: str | None, what: str) -> str | None:
    """A regex of the finder's form, held to a request's bodyRegexToMatch rule
    (ledger/limits.py): ValueError, shown as the visitor's mistake, when the store
    could not take it (Postgres refuses a NUL in it)."""
    if not value:
        return None
    wrong = limits.problem(limits.BODY_REGEX, value)
    if wrong is not None:
        raise ValueError(f"the {what} {wrong}")
    return value


def finder(backend: Backend, args: dict[str, str]) -> str:
    api = backend.api
    queue_name, state_name = args.get("queue", ""), args.get("state", "") or "PENDING"
    priorities = ["", *(str(p) for p in range(1, api.config.max_priority + 1))]
    queues = [q.name for q in api.store.queues()]
    form = (
        '<form class="filters" method="get" action="/jobs">'
        f'<label>queue<select name="queue">{_options(queues, queue_name)}</select></label>'
        f'<label>state<select name="state">{_options([s.name for s in JobState], state_name)}'
        "</select></label>"
        f'<label>priority<select name="priority">{_options(priorities, args.get("priority", ""))}'
        "</select></label>"
        f'<label>body regex<input name="body" value="{esc(args.get("body", ""))}"></label>'
        f'<label>custom status regex<input name="status" value="{esc(args.get("status", ""))}">'
        "</label><button>Find</button></form>"
        '<form class="filters" method="get" action="/job">'
        '<label>descriptor<input name="d" size="32" placeholder="queue:s0:p1:5000"></label>'
        "<button>Open</button></form>"
    )
    if not queue_name:
        return form
    queue = load_queue(api, queue_name)
    settle(api, queue)  # as scanJobs: the page shows everything in the log as of now
    search = JobSearch(
        queue=queue.name,
        state=JobState[state_name],
        priority=int(args["priority"]) if args.get("priority") else None,
        body_regex=search_regex(args.get("body"), "body regex"),
        status_regex=search_regex(args.get("status"), "custom status regex"),
    )
    api.store.check_regex(search.body_regex)
    api.store.check_regex(search.status_regex)
    after = paging.parse_token(args.get("after"))
    rows, next_token = paging.page(api.store.find_jobs(search, after, PAGE_SIZE + 1), PAGE_SIZE)
    shown = []
    for row in rows:
        d = str(
            descriptor.JobDescriptor(queue.name, row.partition, row.job.priority, row.job.local_id)
        )
        kind, text = body_text(row.job.body, 300)
        shown.append(
            [
                f'<a href="{esc(url("/job", d=d))}"><code>{esc(d)}</code></a>',
                esc(row.job.state.name),
                esc(when(row.job.run_after)),
                f"{row.job.attempts_remaining}/{row.job.attempts_allowed}",
                f'<code class="body-{kind}">{esc(text)}</code>',
                f"<code>{esc(row.job.custom_status[-200:])}</code>",
            ]
        )
    nav = ""
    if next_token is not None:
        link = url("/jobs", **{**args, "after": next_token})
        nav = f'<p><a class="next" href="{esc(link)}">next page →</a></p>'
    first = (
        f'<p><a href="{esc(url("/jobs", **{**args, "after": ""}))}">first page</a></p>'
        if after
        else ""
    )
    count = (
        f'<p class="muted" data-rows="{len(rows)}">{len(rows)} jobs on this page (at most '
        f"{PAGE_SIZE}), newest run_after first.</p>"
    )
    headers = ["job", "state", "run after (UTC)", "attempts left", "body", "custom status"]
    return form + count + table(headers, shown, "jobs") + first + nav


def life(backend: Backend, text: str) -> str:
    api = backend.api
    parsed = descriptor.parse(text)
    queue = load_queue(api, parsed.queue)
    check_job(api, queue, parsed)
    history = build_history(parsed, history_rows(api, queue.name, parsed))
    now = api.clock.now_ms()
    current = api.store.lookup(queue.name, [(parsed.partition, parsed.local_id)], True)
    parts = [_facts(backend, history, current[0].job.body if current else None)]
    lay = timeline.layout(history, now)
    parts.append("<h2>Attempts</h2>" + svg.timeline(lay))
    parts.append(
        '<p class="legend"><span><i class="seg delay" style="background:#cfd8dc"></i>waiting '
        'to be due</span><span><i style="background:#ffcc80"></i>queued</span><span><i '
        'style="background:#81c784"></i>running</span><span><i style="background:#e57373">'
        '</i>lost to a timeout</span><span>● step &nbsp; <b class="error">✕</b> rejected '
        "step</span></p>"
    )
    attempts = [
        [
            str(a.number),
            f"<code>{esc(a.claim)}</code>",
            esc(a.outcome.value),
            esc(duration(a.queued_ms)),
            esc(duration(a.running_ms)),
            esc(duration(a.retry_delay_ms)),
            esc(duration(a.timeout_lost_ms or None)),
        ]
        for a in history.attempts
    ]
    parts.append(
        table(
            ["#", "claim", "outcome", "queued", "running", "retry delay", "lost"],
            attempts,
            "attempts",
        )
    )
    steps = []
    for step in history.steps:
        verdict = (
            "applied" if step.applied else f'<b class="error">rejected: {esc(step.reason)}</b>'
        )
        change = (
            ""
            if step.status_change is None
            else f"{step.status_change.kind}: {step.status_change.text}"
        )
        steps.append(
            (
                step.applied,
                [
                    esc(when(step.at)),
                    esc(step.action),
                    esc(step.source),
                    f"<code>{esc(step.claim or '-')}</code>",
                    str(step.attempt),
                    verdict,
                    esc("-" if step.state_after is None else step.state_after.name),
                    f"<code>{esc(change)}</code>",
                ],
            )
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in [
            "time (UTC)",
            "action",
            "who",
            "claim",
            "attempt",
            "verdict",
            "state after",
            "custom status",
        ]
    )
    body = "".join(
        f'<tr class="{"applied" if ok else "rejected"}">'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
        for ok, cells in steps
    )
    parts.append(
        f'<h2>Steps</h2><table class="steps"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )
    return "".join(parts)


def trace_cell(history: JobHistory, template: str) -> str:
    """The job's own trace id (job_trace.py), a link into the trace viewer when
    `template` (PINLEDGER_TRACE_URL_TEMPLATE) is set, its `{trace_id}` replaced; "-"
    when the enqueue was not traced (the job has no live trace)."""
    if trace_export.enqueue_traceparent(history) is None:
        return "-"
    trace_id = f"{trace_export.trace_id_for(history):032x}"
    trace = f"<code>{esc(trace_id)}</code>"
    if template:
        link = template.replace("{trace_id}", trace_id)
        trace = f'<a class="trace" href="{esc(link)}">{trace}</a>'
    return trace


def _facts(backend: Backend, history: JobHistory, body: bytes | None) -> str:
    job = history.job
    trace = trace_cell(history, backend.trace_url_template)
    rows = [
        ["state", esc(job.state.name if job else "gone (deleted or collected)")],
        ["priority", esc(job.priority if job else "-")],
        ["attempts left", esc(f"{job.attempts_remaining}/{job.attempts_allowed}" if job else "-")],
        ["enqueued (UTC)", esc(when(history.enqueued_at))],
        ["run after (UTC)", esc(when(job.run_after) if job else "-")],
        ["trace", trace],
    ]
    if job is not None and job.unique_key is not None:
        # A unique job (decision 0037), or a periodic job's tick (0038).
        rows.append(["unique key", f'<code class="unique-key">{esc(job.unique_key)}</code>'])
    out = table(["", ""], rows, "facts")
    status = job.custom_status if job else ""
    out += f'<h2>Custom status</h2><pre class="status">{esc(status) or "(empty)"}</pre>'
    if body is not None:
        kind, text = body_text(body, 8000)
        out += (
            f"<h2>Body ({esc(kind)}, {len(body):,} bytes)</h2>"
            f'<pre class="body-{kind}">{esc(text)}</pre>'
        )
    return out
