"""The dashboard's pure parts: the timeline's geometry, failures grouped by their last
error, sessions and CSRF tokens, keyset page tokens; the standalone dashboard's owner."""

from __future__ import annotations

import hashlib

import pytest

from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Succeeded
from pinledger.ledger.state import Job, JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.history import build_history
from pinledger.projections.store import JobRow, ScanKey, StoreError
from pinledger.service.dashboard import paging, timeline
from pinledger.service.dashboard.auth import Sessions
from pinledger.service.dashboard.backend import NoOwner
from pinledger.service.dashboard.failures import NO_ERROR, error_key, group_failures
from pinledger.service.password import AdminPassword, hash_password, hash_password_scrypt
from pinledger.service.testing.clock import FakeClock
from pinledger.service.testing.fake_log import FakeLog
from pinledger.service.testing.fake_store import FakeStore
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


# -- failures -------------------------------------------------------------------------


def _failed(local_id: int, status: str, partition: int = 0) -> JobRow:
    job = Job(local_id, 1, JobState.FAILED, b"", 3, 0, status, T0, T0, T0)
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
