"""The dashboard's pure parts: the timeline's geometry, failures grouped by their last
error (in one queue and across queues), the overview's rates, ages, counts and totals,
sessions and CSRF tokens, keyset page tokens; the standalone dashboard's owner."""

from __future__ import annotations

import dataclasses
import hashlib
from types import SimpleNamespace
from typing import Any

import pytest

from pinledger.dashboard import jobs, overview, paging, timeline
from pinledger.dashboard.auth import Sessions
from pinledger.dashboard.backend import NoOwner
from pinledger.dashboard.failures import (
    NO_ERROR,
    error_key,
    group_across_queues,
    group_failures,
)
from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Succeeded
from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.state import Job, JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.history import build_history
from pinledger.projections.store import JobRow, QueueTally, ScanKey, StoreError
from pinledger.service.observability import job_trace, trace_export
from pinledger.service.security.password import AdminPassword, hash_password, hash_password_scrypt
from tests.unit.test_history import STORY, T0, D, rows_for

# -- the timeline ---------------------------------------------------------------------


def test_one_bar_per_attempt_with_its_segments() -> None:
    history = build_history(D, rows_for(STORY))
    lay = timeline.layout(history, now=T0 + 7000)
    assert [b.attempt for b in lay.bars] == [1, 2, 3]
    kinds = [[s.kind for s in b.segments] for b in lay.bars]
    # 1: initial delay, queued, running, then its retry delay; 2: queued, lost to the
    # timeout; 3: queued from the timeout to its claim, running.
    assert kinds == [
        ["delay", "queued", "running", "delay"],
        ["queued", "lost"],
        ["queued", "running"],
    ]
    first = lay.bars[0].segments
    assert [(s.start, s.end) for s in first] == [
        (T0, T0 + 100),
        (T0 + 100, T0 + 150),
        (T0 + 150, T0 + 400),
        (T0 + 400, T0 + 1400),
    ]
    assert [b.outcome for b in lay.bars] == ["failed", "timed out", "succeeded"]


def test_every_step_is_a_mark_and_the_stale_ack_stands_out() -> None:
    history = build_history(D, rows_for(STORY))
    lay = timeline.layout(history, now=T0 + 7000)
    assert len(lay.marks) == len(STORY)
    rejected = [m for m in lay.marks if m.rejected]
    assert [(m.step.action, m.step.source) for m in rejected] == [("Succeeded", "worker:host-2")]
    # Drawn on the row of the attempt whose claim timed out (attempt 2).
    assert rejected[0].y == lay.bars[1].y + timeline.ROW_HEIGHT / 2


def test_bars_stay_inside_the_drawing_in_time_order() -> None:
    history = build_history(D, rows_for(STORY))
    lay = timeline.layout(history, now=T0 + 7000, width=600)
    xs = [s.x for b in lay.bars for s in b.segments]
    assert min(xs) >= timeline.LABEL_WIDTH
    assert max(s.x + s.width for b in lay.bars for s in b.segments) <= 600
    assert xs == sorted(xs)


def test_a_job_never_claimed_is_one_bar_waiting_until_now() -> None:
    history = build_history(D, rows_for(STORY[:1]))
    lay = timeline.layout(history, now=T0 + 1000)
    assert len(lay.bars) == 1
    assert [(s.kind, s.start, s.end) for s in lay.bars[0].segments] == [
        ("delay", T0, T0 + 100),
        ("queued", T0 + 100, T0 + 1000),
    ]


def test_the_job_page_links_its_trace_id_into_the_configured_viewer() -> None:
    history = build_history(D, rows_for(STORY))
    # The job's own trace (each job is one), derived from its enqueue's.
    own = f"{job_trace.trace_id(trace_export.enqueue_traceparent(history), str(D)):032x}"
    assert own != "a" * 32  # not the enqueue call's trace
    template = "https://jaeger.example/trace/{trace_id}?uiFind=x&y=1"
    assert jobs.trace_cell(history, template) == (
        f'<a class="trace" href="https://jaeger.example/trace/{own}?uiFind=x&amp;y=1">'
        f"<code>{own}</code></a>"
    )
    # No template: the id alone; no trace context on the enqueue: nothing to show.
    assert jobs.trace_cell(history, "") == f"<code>{own}</code>"
    untraced = build_history(D, [r._replace(traceparent=None) for r in rows_for(STORY)])
    assert jobs.trace_cell(untraced, template) == "-"


def test_a_finder_regex_no_store_can_take_is_the_visitors_mistake() -> None:
    assert jobs.search_regex("", "body regex") is None
    assert jobs.search_regex("^a.*b$", "body regex") == "^a.*b$"
    with pytest.raises(ValueError, match="the body regex contains NUL"):
        jobs.search_regex("a\x00", "body regex")
    with pytest.raises(ValueError, match="the custom status regex is 4097 characters"):
        jobs.search_regex("x" * 4097, "custom status regex")


# -- failures -------------------------------------------------------------------------


def _failed(local_id: int, status: str, partition: int = 0, at: int = T0) -> JobRow:
    job = Job(local_id, 1, JobState.FAILED, b"", 3, 0, status, T0, T0, at)
    return JobRow(partition, job)


def test_the_error_key_is_the_first_line_of_the_last_error() -> None:
    worker = (
        "attempt 1 failed: OSError: disk full; retry in 2 s\n"
        "attempt 2 failed: ValueError: corrupt image; no attempts left\n"
    )
    assert error_key(worker) == "ValueError: corrupt image"
    assert error_key("attempt 1 failed: KeyError; not retried (retry policy: never)\n") == (
        "KeyError"
    )
    assert error_key("started\ntimeout talking to S3\n\n") == "timeout talking to S3"
    assert error_key("") == NO_ERROR


def test_failures_group_by_error_largest_first() -> None:
    rows = [
        _failed(1, "attempt 3 failed: ValueError: corrupt image; no attempts left\n"),
        _failed(
            2,
            "attempt 1 failed: OSError: disk full; retry in 1 s\n"
            "attempt 2 failed: ValueError: corrupt image; no attempts left\n",
        ),
        _failed(3, "attempt 1 failed: OSError: disk full; no attempts left\n"),
    ]
    groups = group_failures(rows)
    assert [(g.error, g.count) for g in groups] == [
        ("ValueError: corrupt image", 2),
        ("OSError: disk full", 1),
    ]
    assert [r.job.local_id for r in groups[0].jobs] == [1, 2]


def test_failures_across_queues_group_by_error_alone_with_a_count_per_queue() -> None:
    corrupt = "attempt 1 failed: ValueError: corrupt image; no attempts left\n"
    rows = {
        "images": [_failed(1, corrupt, at=T0 + 1), _failed(2, "disk full\n", at=T0 + 5)],
        "thumbs": [_failed(7, corrupt, at=T0 + 3), _failed(8, corrupt, 1, at=T0 + 2)],
        "empty": [],
    }
    groups = group_across_queues(rows)
    assert [(g.error, g.count) for g in groups] == [
        ("ValueError: corrupt image", 3),
        ("disk full", 1),
    ]
    assert groups[0].queues() == [("thumbs", 2), ("images", 1)]
    # The last failed first, whichever queue it is in.
    assert [(q, r.job.local_id) for q, r in groups[0].jobs] == [
        ("thumbs", 7),
        ("thumbs", 8),
        ("images", 1),
    ]
    assert group_across_queues({}) == []


# -- the overview ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "window_ms", "shown"),
    [
        (0, 300_000, "0"),
        (1, 300_000, "0.2"),
        (12, 300_000, "2.4"),
        (50, 300_000, "10"),
        (6001, 300_000, "1,200"),
        (3, 60_000, "3.0"),
    ],
)
def test_rates_are_per_minute_over_the_window(events: int, window_ms: int, shown: str) -> None:
    assert overview.per_minute(events, window_ms) == shown


def test_a_count_at_its_cap_is_a_lower_bound_and_an_age_is_since_due() -> None:
    assert overview.count_text(1234, capped=False) == "1,234"
    assert overview.count_text(10_000, capped=True) == "10,000+"
    assert overview.age_text(T0 + 90_000, T0) == "90.0 s"
    assert overview.age_text(T0 + 3 * 3600_000, T0) == "3.0 h"
    assert overview.age_text(T0, None) == "-"
    assert overview.rate_limit_text(None) == "unlimited"
    assert overview.rate_limit_text(0) == "paused (0 jobs/s)"
    assert overview.rate_limit_text(2.5) == "2.5 jobs/s"


def _line(name: str, tally: QueueTally, oldest: int | None = None) -> overview.QueueLine:
    return overview.QueueLine(name, tally, 10, 5, 1, oldest, None)


def test_the_totals_add_up_and_a_capped_queue_makes_its_column_a_lower_bound() -> None:
    cap = overview.COUNT_CAP
    lines = [
        _line("a", QueueTally(3, 1, 2, cap, 0), oldest=T0 + 50),
        _line("b", QueueTally(4, 0, 1, 7, 2), oldest=T0),
        _line("c", QueueTally(0, 0, 0, 0, 0)),
    ]
    counts, total = overview.totals(lines)
    assert counts == [(7, False), (1, False), (3, False), (cap + 7, True), (2, False)]
    assert (total.enqueued, total.succeeded, total.failed) == (30, 15, 3)
    assert total.oldest_due == T0
    assert overview.totals([])[0] == [(0, False)] * 5


def test_the_overview_table_links_each_queue_and_ends_with_the_totals() -> None:
    lines = [
        _line("mail", QueueTally(3, 1, 2, 40, 1), oldest=T0),
        _line("img&x", QueueTally(0, 0, 0, 0, 0)),
    ]
    html = overview.render(lines, T0 + 120_000)
    assert '<tr data-queue="mail"><th scope="row"><a href="/queue?name=mail">mail</a>' in html
    assert 'href="/queue?name=img%26x">img&amp;x</a>' in html
    assert (
        '<td class="num" data-col="pending"><a href="/jobs?queue=mail&amp;state=PENDING">3' in html
    )
    assert 'data-col="oldest">2.0 min</td>' in html
    assert 'data-col="enqueued">2.0</td>' in html
    total = html[html.index("<tfoot>") :]
    assert 'data-col="succeeded">40</td>' in total and 'data-col="failed">1</td>' in total
    assert "The first" not in html
    assert "The first 2 queues of 7." in overview.render(lines, T0, more=5)


def test_the_overview_without_queues_says_how_to_create_one() -> None:
    html = overview.render([], T0)
    assert "No queues yet" in html and "createQueue" in html and "<table" not in html


# -- sessions and CSRF ----------------------------------------------------------------


def _sessions(clock: FakeClock) -> Sessions:
    return Sessions(
        AdminPassword(sha256=hash_password("s3cret", "salt"), salt="salt"), clock, FakeStore()
    )


def test_a_session_needs_the_password_and_expires() -> None:
    clock = FakeClock()
    sessions = _sessions(clock)
    assert sessions.login("wrong") is None
    cookie = sessions.login("s3cret")
    assert cookie is not None
    assert sessions.user(cookie) == "admin"
    clock.advance(8 * 3600 + 1)
    assert sessions.user(cookie) is None


def test_a_forged_or_foreign_cookie_is_nobody() -> None:
    clock = FakeClock()
    cookie = _sessions(clock).login("s3cret")
    assert cookie is not None
    user, expires, nonce, signature = cookie.split(".")
    assert _sessions(clock).user(f"root.{expires}.{nonce}.{signature}") is None
    assert _sessions(clock).user(f"{user}.{int(expires) + 1}.{nonce}.{signature}") is None
    assert _sessions(clock).user(f"{user}.{expires}.{signature}") is None  # 0.1.0's form
    # Another password signs everyone out.
    other = Sessions(
        AdminPassword(sha256=hash_password("other", "salt"), salt="salt"), clock, FakeStore()
    )
    assert other.user(cookie) is None
    # Without a configured password nobody logs in.
    assert Sessions(AdminPassword(), clock, FakeStore()).login("") is None


def test_a_scrypt_password_logs_in_and_a_new_one_signs_everyone_out() -> None:
    clock = FakeClock()
    sessions = Sessions(AdminPassword(scrypt=hash_password_scrypt("s3cret")), clock, FakeStore())
    assert sessions.login("s3cret!") is None
    cookie = sessions.login("s3cret")
    assert cookie is not None and sessions.user(cookie) == "admin"
    changed = Sessions(AdminPassword(scrypt=hash_password_scrypt("s3cret")), clock, FakeStore())
    assert changed.user(cookie) is None  # same password, new salt: a new hash


def test_a_logout_ends_its_session_on_every_server_of_the_store() -> None:
    clock, store = FakeClock(), FakeStore()
    password = AdminPassword(sha256=hash_password("s3cret", "salt"), salt="salt")
    here, there = Sessions(password, clock, store), Sessions(password, clock, store)
    first, second = here.login("s3cret"), here.login("s3cret")  # in one millisecond
    assert first is not None and second is not None and first != second
    here.end(first)
    assert here.user(first) is None and there.user(first) is None
    assert there.user(second) == "admin"  # the other session goes on
    assert not there.check_csrf(first, there.csrf_token(first))
    here.end("admin.1.2.forged")  # a cookie that is not ours ends nothing, says nothing
    # Once expired, an ended session's row is forgotten at the next logout.
    clock.advance(8 * 3600 + 1)
    third = here.login("s3cret")
    here.end(third)
    assert not store.session_ended(hashlib.sha256(first.encode()).hexdigest())
    assert store.session_ended(hashlib.sha256((third or "").encode()).hexdigest())


def test_a_store_that_cannot_answer_refuses_the_session_and_the_logout_says_so() -> None:
    clock, store = FakeClock(), FakeStore()
    sessions = Sessions(AdminPassword(scrypt=hash_password_scrypt("s3cret")), clock, store)
    cookie = sessions.login("s3cret")
    store.fail("connection refused")
    assert sessions.user(cookie) is None
    with pytest.raises(StoreError, match="connection refused"):
        sessions.end(cookie)
    store.recover()
    assert sessions.user(cookie) == "admin"


def test_the_csrf_token_is_the_sessions_own() -> None:
    clock = FakeClock()
    sessions = _sessions(clock)
    one, two = sessions.login("s3cret"), sessions.login("s3cret", user="ops")
    assert one is not None and two is not None
    assert sessions.check_csrf(one, sessions.csrf_token(one))
    assert not sessions.check_csrf(one, sessions.csrf_token(two))
    assert not sessions.check_csrf(one, "")
    assert not sessions.check_csrf(None, sessions.csrf_token(one))


# -- page tokens ----------------------------------------------------------------------


def test_a_page_token_reads_back_as_the_last_row_shown() -> None:
    rows = [_failed(i, "", partition=i % 2) for i in range(5)]
    shown, token = paging.page(rows, 4)
    assert len(shown) == 4
    assert token is not None
    assert paging.parse_token(token) == ScanKey(T0, 1, 3)
    assert paging.page(rows, 5) == (rows, None)
    assert paging.parse_token("") is None


@pytest.mark.parametrize("token", ["abc", "1.2", "1.-1.3", "1.2.3.4", f"1.2.{2**63}"])
def test_a_made_up_page_token_is_refused(token: str) -> None:
    with pytest.raises(paging.PageTokenError):
        paging.parse_token(token)


# -- the standalone dashboard's owner ---------------------------------------------------


def test_the_dashboard_claims_nothing_but_appends_a_dequeues_acks() -> None:
    log = FakeLog()
    log.create_topic("p.q.mail", 1)
    owner = NoOwner(LedgerWriter(log, "p."))
    acks = ([("mail", 0, [Succeeded(local_id=7)])], None)
    assert owner.dequeue("mail", 5, 1000, Actor(server="dash"), alongside=acks) == []
    [record] = log.records("p.q.mail", 0)
    assert codec.decode(record.value).events == (Succeeded(local_id=7),)


def test_the_job_page_shows_a_unique_jobs_key_and_nothing_for_a_plain_job() -> None:
    history = build_history(D, rows_for(STORY))
    assert history.job is not None
    backend: Any = SimpleNamespace(trace_url_template="")
    assert "unique key" not in jobs._facts(backend, history, None)
    keyed = dataclasses.replace(
        history, job=dataclasses.replace(history.job, unique_key="schedule:<nightly>:5")
    )
    shown = jobs._facts(backend, keyed, None)
    assert '<code class="unique-key">schedule:&lt;nightly&gt;:5</code>' in shown
