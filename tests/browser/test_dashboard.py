"""The dashboard in a real browser, against a real server on the real stack."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from pinledger.idl import pinlater
from pinledger.service.dashboard.auth import COOKIE
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    run_pinledger,
    wait_for,
)
from tests.browser.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.integration]

DASHBOARD_SOURCE = "dashboard:admin"


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Any]:
    thrift = server.client()
    yield thrift
    thrift.close()


def _page(server: ServerProcess, path: str) -> str:
    return f"http://127.0.0.1:{server.admin_port}{path}"


def _queue(client: Any) -> str:
    name = f"dash_{uuid.uuid4().hex[:8]}"
    client.createQueue(context(), name)
    return name


def _enqueue(client: Any, queue: str, bodies: list[bytes], attempts: int = 1) -> list[str]:
    jobs = [pinlater.PinLaterJob(body=b, numAttemptsAllowed=attempts) for b in bodies]
    answer = client.enqueueJobs(context(), pinlater.PinLaterEnqueueRequest(queue, jobs))
    return list(answer.jobDescriptors)


def _ack(
    client: Any,
    queue: str,
    ok: list[str],
    failed: list[str],
    source: str = "tests:host",
    status: str = "",
) -> None:
    info = pinlater.PinLaterJobAckInfo
    client.ackDequeuedJobs(
        context(source),
        pinlater.PinLaterJobAckRequest(
            queue,
            jobsSucceeded=[info(jobDescriptor=d) for d in ok],
            jobsFailed=[info(jobDescriptor=d, appendCustomStatus=status) for d in failed],
        ),
    )


def _count(client: Any, queue: str, state: int) -> int:
    return int(
        client.getJobCount(
            context(), pinlater.PinLaterGetJobCountRequest(queueName=queue, jobState=state)
        )
    )


def _count_once_projected(client: Any, queue: str, state: int) -> int | None:
    """A count, or None while the projection is more than PINLEDGER_READ_WAIT_S behind
    the log: after 100k enqueues on a busy machine the server answers that with the
    retryable SHARD_CONNECTION_FAILED, and a client retries it."""
    try:
        return _count(client, queue, state)
    except pinlater.PinLaterException as behind:
        if behind.errorCode != pinlater.ErrorCode.SHARD_CONNECTION_FAILED:
            raise
        assert "the projection is behind the log" in behind.message
        return None


def _cell(browser: webdriver.Chrome, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def test_the_queue_page_shows_counts_after_jobs_ran(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    _enqueue(client, queue, [f"job {i}".encode() for i in range(10)])
    got = dequeue_until(client, queue, 6, limit=6)
    _ack(client, queue, list(got)[:4], list(got)[4:6], status="attempt 1 failed: boom\n")
    wait_for(lambda: _count(client, queue, pinlater.PinLaterJobState.SUCCEEDED) == 4)
    browser.get(_page(server, f"/queue?name={queue}"))
    assert _cell(browser, '[data-total="PENDING"]') == "4"
    assert _cell(browser, '[data-total="SUCCEEDED"]') == "4"
    assert _cell(browser, '[data-total="FAILED"]') == "2"
    assert _cell(browser, '[data-total="IN_PROGRESS"]') == "0"
    assert "10" in _cell(browser, '[data-card="enqueued, last hour"]')
    assert "4" in _cell(browser, '[data-card="succeeded, last hour"]')
    partitions = browser.find_elements(By.CSS_SELECTOR, "table.partitions tbody tr")
    assert len(partitions) == 4
    assert all(f"127.0.0.1:{server.port}" in row.text for row in partitions), [
        r.text for r in partitions
    ]


def test_the_queue_page_shows_a_resize_its_reason_and_the_draining_then_retired_partitions(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    shrunk = run_pinledger("queue", "resize", queue, "2", PINLEDGER_TOPIC_PREFIX=server.prefix)
    assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr

    def drained_rows() -> list[str]:
        browser.get(_page(server, f"/queue?name={queue}"))
        rows = browser.find_elements(By.CSS_SELECTOR, "table.partitions tbody tr")
        return [r.text for r in rows] if "draining" in (rows[-1].text if rows else "") else []

    rows = wait_for(drained_rows, timeout=30)
    assert len(rows) == 4
    assert ["draining" in row for row in rows] == [False, False, True, True], rows
    (resize,) = browser.find_elements(By.CSS_SELECTOR, "table.resizes tbody tr")
    assert "pinledger queue resize, by" in resize.text
    assert "pinledger:queue-resize" in resize.text

    # Empty, the closed partitions retire (PINLEDGER_RETIRE_AFTER_S is 3 here).
    def retired_rows() -> list[str]:
        browser.get(_page(server, f"/queue?name={queue}"))
        rows = browser.find_elements(By.CSS_SELECTOR, "table.partitions tbody tr")
        return [r.text for r in rows] if "retired" in (rows[-1].text if rows else "") else []

    rows = wait_for(retired_rows, timeout=30)
    assert ["retired" in row for row in rows] == [False, False, True, True], rows
    changes = browser.find_elements(By.CSS_SELECTOR, "table.resizes tbody tr")
    assert "partitions 2..3 retired" in changes[0].text, [c.text for c in changes]
    assert "pinledger:owner" in changes[0].text
    assert "takes jobs on 2 partition(s)" in changes[1].text


def _overview_cells(browser: webdriver.Chrome, queue: str) -> dict[str, str]:
    row = browser.find_element(By.CSS_SELECTOR, f'table.overview tr[data-queue="{queue}"]')
    cells = row.find_elements(By.CSS_SELECTOR, "td")
    return {str(c.get_attribute("data-col")): str(c.text) for c in cells}


def _number(text: str) -> int:
    return int(text.rstrip("+").replace(",", ""))


def test_the_overview_shows_every_queue_at_a_glance(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    busy, quiet = _queue(client), _queue(client)
    # busy: 6 jobs; 3 run (2 succeed, 1 fails for good), 2 more wait for an hour.
    _enqueue(client, busy, [f"job {i}".encode() for i in range(6)])
    ran = list(dequeue_until(client, busy, 3, limit=1))
    _ack(client, busy, ran[:2], ran[2:], status="attempt 1 failed: boom; no attempts left\n")
    later = int(time.time() * 1000) + 3600_000
    jobs = [pinlater.PinLaterJob(body=b"later", runAfterTimestampMillis=later) for _ in range(2)]
    client.enqueueJobs(context(), pinlater.PinLaterEnqueueRequest(busy, jobs))
    _enqueue(client, quiet, [b"a", b"b", b"c"])
    wait_for(lambda: _count(client, busy, pinlater.PinLaterJobState.FAILED) == 1)
    wait_for(lambda: _count(client, quiet, pinlater.PinLaterJobState.PENDING) == 3)
    # One more runs now; its claim would time out after 2 s, so each look renews it.
    (running,) = dequeue_until(client, busy, 1, limit=1)
    renew = pinlater.PinLaterCheckpointJobsRequest(
        busy, [pinlater.PinLaterCheckpointJobRequest(jobDescriptor=running)]
    )

    def shown() -> dict[str, str]:
        client.checkpointJobs(context(), renew)
        browser.get(_page(server, "/queues"))
        cells = _overview_cells(browser, busy)
        return cells if cells["running"] == "1" else {}

    cells = wait_for(shown, timeout=10, pause=0.1)
    assert {k: cells[k] for k in ("pending", "later", "running", "failed", "succeeded")} == {
        "pending": "2",
        "later": "2",
        "running": "1",
        "failed": "1",
        "succeeded": "2",
    }
    # Per minute over the last 5 minutes: 8 enqueued, 2 succeeded, 1 failed attempt.
    assert (cells["enqueued"], cells["completed"], cells["failing"]) == ("1.6", "0.4", "0.2")
    assert re.fullmatch(r"[0-9.]+ (ms|s)", cells["oldest"]), cells["oldest"]
    assert cells["limit"] == "unlimited"
    other = _overview_cells(browser, quiet)
    assert (other["pending"], other["running"], other["enqueued"]) == ("3", "0", "0.6")
    assert re.fullmatch(r"[0-9.]+ (ms|s)", other["oldest"]), other["oldest"]
    # The totals row adds every queue of the server (other tests' queues too).
    total = {
        str(c.get_attribute("data-col")): str(c.text)
        for c in browser.find_elements(By.CSS_SELECTOR, "table.overview tr.total td")
    }
    assert _number(total["pending"]) >= 5 and _number(total["later"]) >= 2
    # Each queue links to its page.
    browser.find_element(By.CSS_SELECTOR, f'table.overview tr[data-queue="{quiet}"] th a').click()
    wait_for(lambda: browser.title.startswith(f"Queue {quiet}"))
    assert _cell(browser, '[data-total="PENDING"]') == "3"


def test_finding_a_job_by_body_regex(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    (needle,) = _enqueue(client, queue, [b"needle-42"])
    _enqueue(client, queue, [b"hay %d" % i for i in range(20)] + [b"\xff\x00binary"])
    browser.get(_page(server, f"/jobs?queue={queue}&state=PENDING&body=needle-%5Cd%2B"))
    rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
    assert [r.find_element(By.TAG_NAME, "code").text for r in rows] == [needle]
    assert "needle-42" in rows[0].text
    # A body that is not text is shown in hex.
    browser.get(_page(server, f"/jobs?queue={queue}&state=PENDING&body=binary"))
    assert _cell(browser, "table.jobs code.body-hex") == "ff 00 62 69 6e 61 72 79"


def test_the_job_page_draws_one_bar_per_attempt_and_marks_a_stale_ack(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    (job,) = _enqueue(client, queue, [b"slow"], attempts=3)
    # Attempt 1 by worker-a: its claim times out (PINLEDGER_CLAIM_TIMEOUT_S=2)...
    dequeue_until(client, queue, 1, limit=1, source="worker-a")
    # ...attempt 2 by worker-b claims it once it is due again.
    dequeue_until(client, queue, 1, limit=1, source="worker-b", timeout=30)
    # worker-a acks with its old claim: rejected. worker-b's ack applies.
    _ack(client, queue, [job], [], source="worker-a")
    _ack(client, queue, [job], [], source="worker-b")
    wait_for(lambda: _count(client, queue, pinlater.PinLaterJobState.SUCCEEDED) == 1)
    browser.get(_page(server, f"/job?d={job}"))
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.timeline g.bar")
    assert [b.get_attribute("data-outcome") for b in bars] == ["timed out", "succeeded"]
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline g.bar:first-of-type rect.lost")
    rejected = browser.find_elements(By.CSS_SELECTOR, "svg.timeline g.mark.rejected")
    assert [r.get_attribute("data-action") for r in rejected] == ["Succeeded"]
    rows = browser.find_elements(By.CSS_SELECTOR, "table.steps tr.rejected")
    assert len(rows) == 1 and "worker-a" in rows[0].text


def test_bulk_retry_needs_a_login(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    _enqueue(client, queue, [b"a", b"b", b"c"])
    got = dequeue_until(client, queue, 3, limit=3)
    _ack(
        client,
        queue,
        [],
        list(got),
        status="attempt 1 failed: ValueError: corrupt; no attempts left\n",
    )
    wait_for(lambda: _count(client, queue, pinlater.PinLaterJobState.FAILED) == 3)
    # Read-only without a login: no action buttons, and a forged POST is refused.
    browser.get(_page(server, f"/failures?queue={queue}"))
    assert _cell(browser, "form.group .count") == "3"
    assert "ValueError: corrupt" in _cell(browser, "form.group h2")
    assert not browser.find_elements(By.CSS_SELECTOR, "form.group button")
    browser.execute_script(
        "const f = document.createElement('form'); f.method = 'post'; f.action = '/failures/act';"
        f"for (const [k, v] of [['what','retry-all'],['queue','{queue}'],['confirmed','yes']]) {{"
        "const i = document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); }"
        "document.body.appendChild(f); f.submit();"
    )
    wait_for(lambda: "Not allowed" in browser.title)
    assert _count(client, queue, pinlater.PinLaterJobState.FAILED) == 3
    # Logged in: retry everything in the group, after a confirmation with the count.
    browser.get(_page(server, "/login"))
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form.card button").click()
    # The click returns before the login's answer has set the session cookie.
    wait_for(lambda: browser.get_cookie(COOKIE) is not None)
    browser.get(_page(server, f"/failures?queue={queue}"))
    browser.find_element(By.CSS_SELECTOR, 'form.group button[value="retry-all"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "form.confirm .touches"))
    assert _cell(browser, "form.confirm .touches") == "3"
    browser.find_element(By.CSS_SELECTOR, 'form.confirm button[name="confirmed"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".done"))
    assert browser.find_element(By.CSS_SELECTOR, ".done").get_attribute("data-jobs") == "3"
    wait_for(lambda: _count(client, queue, pinlater.PinLaterJobState.PENDING) == 3)
    # The retry is in each job's history with the dashboard user as its actor.
    (one, *_) = got
    history = client.getJobHistory(context(), pinlater.PinLaterJobHistoryRequest(jobDescriptor=one))
    assert any(step.source == DASHBOARD_SOURCE for step in history.steps)


def test_failures_group_across_all_queues(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    tag = uuid.uuid4().hex[:6]
    shared = f"attempt 1 failed: ValueError: shared {tag}; no attempts left\n"
    first, second = _queue(client), _queue(client)
    _enqueue(client, first, [b"a", b"b", b"c"])
    got = list(dequeue_until(client, first, 3, limit=1))
    _ack(client, first, [], got[:2], status=shared)
    _ack(client, first, [], got[2:], status=f"attempt 1 failed: KeyError: {tag}\n")
    _enqueue(client, second, [b"d"])
    _ack(client, second, [], list(dequeue_until(client, second, 1, limit=1)), status=shared)
    wait_for(lambda: _count(client, first, pinlater.PinLaterJobState.FAILED) == 3)
    wait_for(lambda: _count(client, second, pinlater.PinLaterJobState.FAILED) == 1)
    # Without a queue chosen, the page groups every queue's failures.
    browser.get(_page(server, "/failures"))
    groups = {
        g.find_element(By.CSS_SELECTOR, "h2 code").text: g
        for g in browser.find_elements(By.CSS_SELECTOR, "div.group.across")
    }
    group = groups[f"ValueError: shared {tag}"]
    assert group.find_element(By.CSS_SELECTOR, "h2 .count").text == "3"
    spread = [
        (a.get_attribute("data-queue"), a.find_element(By.XPATH, "following-sibling::span").text)
        for a in group.find_elements(By.CSS_SELECTOR, "p.queues a")
    ]
    assert spread == [(first, "2"), (second, "1")]
    assert len(group.find_elements(By.CSS_SELECTOR, "table.failed tbody tr")) == 3
    assert groups[f"KeyError: {tag}"].find_element(By.CSS_SELECTOR, "h2 .count").text == "1"
    # A queue's link opens its own failures, where the actions are.
    group.find_element(By.CSS_SELECTOR, f'p.queues a[data-queue="{first}"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "form.group"))
    counts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "form.group h2 .count")]
    assert counts == ["2", "1"]


def test_a_queue_of_100k_jobs_pages_within_the_read_limits(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    for start in range(0, 100_000, 10_000):
        _enqueue(client, queue, [b"bulk %d" % i for i in range(start, start + 10_000)])
    wait_for(
        lambda: _count_once_projected(client, queue, pinlater.PinLaterJobState.PENDING) == 100_000,
        timeout=120,
    )
    browser.get(_page(server, f"/queue?name={queue}"))
    assert _cell(browser, '[data-total="PENDING"]') == "100,000"
    browser.get(_page(server, f"/jobs?queue={queue}&state=PENDING"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")) == 50
    browser.find_element(By.CSS_SELECTOR, "a.next").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")) == 50


def test_the_past_page_says_why_one_job_is_dequeued_before_another(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = _queue(client)
    [low] = _enqueue(client, queue, [b"low"])  # priority 1 by default: the highest
    jobs = [pinlater.PinLaterJob(body=b"high", priority=2)]
    [high] = client.enqueueJobs(
        context(), pinlater.PinLaterEnqueueRequest(queue, jobs)
    ).jobDescriptors
    wait_for(lambda: _count(client, queue, pinlater.PinLaterJobState.PENDING) == 2)
    moment = int(time.time() * 1000)
    browser.get(_page(server, f"/asof?queue={queue}&at={moment}&a={high}&b={low}"))
    why = _cell(browser, "p.why")
    assert why.startswith(f"{low} before {high}"), why
    assert "priority 1 is taken before priority 2" in why
    # The waiting jobs, in the order a dequeue takes them.
    rows = browser.find_elements(By.CSS_SELECTOR, "table.asof-due tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == [low, high]
