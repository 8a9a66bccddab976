"""A job's Retry, Cancel and Delete buttons on its page, in a real browser against a real
server (issue 42 parts 3 and 4): none without the admin login; logged in, Retry puts a
FAILED job back to PENDING, Delete removes a PENDING one and Cancel ends a running one
FAILED, each in the job's history with the admin as its source."""

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

SOURCE = "dashboard:admin"


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Any]:
    thrift = server.client()
    yield thrift
    thrift.close()


def _page(server: ServerProcess, path: str) -> str:
    return f"http://127.0.0.1:{server.admin_port}{path}"


def _state(client: Any, d: str) -> int:
    found = client.lookupJobs(context(), pinlater.PinLaterLookupJobRequest(jobDescriptors=[d]))
    return int(found[d].jobState) if d in found else -1


def _sources(client: Any, d: str) -> list[str]:
    history = client.getJobHistory(context(), pinlater.PinLaterJobHistoryRequest(jobDescriptor=d))
    return [str(step.source) for step in history.steps]


def test_retry_and_delete_from_the_job_page_need_the_admin_login(
    server: ServerProcess, browser: webdriver.Chrome, client: Any
) -> None:
    queue = f"jobact_{uuid.uuid4().hex[:8]}"
    client.createQueue(context(), queue)
    jobs = [
        pinlater.PinLaterJob(body=b"one", numAttemptsAllowed=1),
        pinlater.PinLaterJob(body=b"two"),
    ]
    failing, waiting = client.enqueueJobs(
        context(), pinlater.PinLaterEnqueueRequest(queue, jobs)
    ).jobDescriptors
    got = dequeue_until(client, queue, 2, limit=2)
    assert set(got) == {failing, waiting}
    info = pinlater.PinLaterJobAckInfo
    client.ackDequeuedJobs(
        context(), pinlater.PinLaterJobAckRequest(queue, jobsFailed=[info(jobDescriptor=failing)])
    )
    wait_for(lambda: _state(client, failing) == pinlater.PinLaterJobState.FAILED)

    browser.get(_page(server, f"/job?d={failing}"))
    assert not browser.find_elements(By.CSS_SELECTOR, "form.job-actions button")

    browser.get(_page(server, "/login"))
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form.card button").click()
    wait_for(lambda: browser.get_cookie(COOKIE) is not None)

    browser.get(_page(server, f"/job?d={failing}"))
    browser.find_element(By.CSS_SELECTOR, 'form.job-actions button[data-action="retry"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".done"))
    assert "retried" in browser.find_element(By.CSS_SELECTOR, ".done").text
    wait_for(lambda: _state(client, failing) == pinlater.PinLaterJobState.PENDING)
    assert SOURCE in _sources(client, failing)

    # Now PENDING: no Retry, and Delete removes it.
    browser.get(_page(server, f"/job?d={failing}"))
    assert not browser.find_elements(By.CSS_SELECTOR, 'button[data-action="retry"]')
    browser.find_element(By.CSS_SELECTOR, 'form.job-actions button[data-action="delete"]').click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".done"))
    assert "deleted" in browser.find_element(By.CSS_SELECTOR, ".done").text
    wait_for(lambda: _state(client, failing) == -1)
    # The other job, IN_PROGRESS, is offered neither, only Cancel (decision 0036): it
    # ends FAILED, saying who cancelled it.
    browser.get(_page(server, f"/job?d={waiting}"))
    offered = browser.find_elements(By.CSS_SELECTOR, "form.job-actions button")
    assert [b.get_attribute("data-action") for b in offered] == ["cancel"]
    offered[0].click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".done"))
    assert "cancelled" in browser.find_element(By.CSS_SELECTOR, ".done").text
    wait_for(lambda: _state(client, waiting) == pinlater.PinLaterJobState.FAILED)
    found = client.lookupJobs(
        context(), pinlater.PinLaterLookupJobRequest(jobDescriptors=[waiting])
    )
    assert "cancelled by dashboard:admin" in found[waiting].customStatus
    assert SOURCE in _sources(client, waiting)
