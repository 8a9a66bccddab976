"""A queue's Pause and Resume buttons in a real browser, against a real server on the
real stack (issue 42 part 4, decision 0035): read-only without the admin login (a forged
POST is refused); logged in, Pause holds the queue's jobs back (dequeueJobs answers
none, /metrics says paused) and Resume hands them out again. The queue's workers view
lists each claim source with the jobs it holds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from pinledger.dashboard.auth import COOKIE
from pinledger.idl import pinlater
from pinledger.service.testing.servers import ServerProcess, context, dequeue_until, wait_for
from tests.browser.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Any]:
    thrift = server.client()
    yield thrift
    thrift.close()


def _page(server: ServerProcess, path: str) -> str:
    return f"http://127.0.0.1:{server.admin_port}{path}"


def _gauge(server: ServerProcess, queue: str) -> str | None:
    text = str(server.admin_get("/metrics").read().decode())
    for line in text.splitlines():
        if line.startswith(f'pinledger_queue_paused{{queue="{queue}"}} '):
            return str(line.split()[-1])
    return None


def _dequeue(client: Any, queue: str) -> dict[str, bytes]:
    answer = client.dequeueJobs(
        context(), pinlater.PinLaterDequeueRequest(queueName=queue, limit=10)
    )
    return dict(answer.jobs or {})


def test_pause_and_resume_need_the_admin_login_and_hold_the_jobs_back(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = f"pause_{uuid.uuid4().hex[:8]}"
    client.createQueue(context(), queue)
    jobs = [pinlater.PinLaterJob(body=b"held %d" % i) for i in range(3)]
    client.enqueueJobs(context(), pinlater.PinLaterEnqueueRequest(queue, jobs))

    # Read-only without a login: the state, no button, and a forged POST is refused.
    browser.get(_page(server, f"/queue?name={queue}"))
    assert (
        browser.find_element(By.CSS_SELECTOR, "[data-paused]").get_attribute("data-paused") == "no"
    )
    assert not browser.find_elements(By.CSS_SELECTOR, "form.pause button")
    browser.execute_script(
        "const f = document.createElement('form'); f.method = 'post'; f.action = '/queue/pause';"
        f"for (const [k, v] of [['name','{queue}'],['paused','yes']]) {{"
        "const i = document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); }"
        "document.body.appendChild(f); f.submit();"
    )
    wait_for(lambda: "Not allowed" in browser.title)

    browser.get(_page(server, "/login"))
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form.card button").click()
    wait_for(lambda: browser.get_cookie(COOKIE) is not None)

    browser.get(_page(server, f"/queue?name={queue}"))
    browser.find_element(By.CSS_SELECTOR, "form.pause input[name=reason]").send_keys("a test")
    browser.find_element(By.CSS_SELECTOR, 'form.pause button[data-action="pause"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".done"))
    assert "paused" in browser.find_element(By.CSS_SELECTOR, ".done").text
    wait_for(lambda: _gauge(server, queue) == "1")
    assert _dequeue(client, queue) == {}
    browser.get(_page(server, f"/queue?name={queue}"))
    assert (
        browser.find_element(By.CSS_SELECTOR, "[data-paused]").get_attribute("data-paused") == "yes"
    )
    browser.get(_page(server, "/queues"))
    assert (
        "paused"
        in browser.find_element(
            By.CSS_SELECTOR, f'tr[data-queue="{queue}"] [data-col="limit"]'
        ).text
    )

    browser.get(_page(server, f"/queue?name={queue}"))
    browser.find_element(By.CSS_SELECTOR, 'form.pause button[data-action="resume"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".done"))
    wait_for(lambda: _gauge(server, queue) == "0")
    assert len(dequeue_until(client, queue, 3, limit=10)) == 3


def test_the_workers_view_lists_each_claim_source_with_its_jobs_and_heartbeat(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = f"workers_{uuid.uuid4().hex[:8]}"
    client.createQueue(context(), queue)
    jobs = [pinlater.PinLaterJob(body=b"w %d" % i) for i in range(3)]
    client.enqueueJobs(context(), pinlater.PinLaterEnqueueRequest(queue, jobs))
    dequeue_until(client, queue, 2, limit=2, source="worker:a")
    dequeue_until(client, queue, 1, limit=1, source="worker:b")
    browser.get(_page(server, f"/queue?name={queue}"))
    browser.find_element(By.CSS_SELECTOR, "a.workers").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "table.workers"))
    rows = browser.find_elements(By.CSS_SELECTOR, "table.workers tbody tr")
    held = [
        (
            row.find_element(By.CSS_SELECTOR, "[data-source]").get_attribute("data-source"),
            row.find_element(By.CSS_SELECTOR, "[data-held]").get_attribute("data-held"),
        )
        for row in rows
    ]
    assert held == [("worker:a", "2"), ("worker:b", "1")]
