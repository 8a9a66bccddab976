"""A queue's periodic jobs on its dashboard page, in a real browser against a real
server (issue 42 part 2, decision 0038): the Schedules table names each schedule, how
it ticks, its last tick with the job it enqueued (a link to the job's page, which shows
the tick's unique key) and its next tick."""

from __future__ import annotations

import re

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from pinledger.service.testing.servers import ServerProcess, context, wait_for
from tests.browser.conftest import TICKING

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _page(server: ServerProcess, path: str) -> str:
    return f"http://127.0.0.1:{server.admin_port}{path}"


def test_the_queue_page_lists_its_schedules_with_the_last_tick_and_its_job(
    server: ServerProcess, browser: webdriver.Chrome
) -> None:
    client = server.client()
    try:
        client.createQueue(context(), TICKING)
    finally:
        client.close()

    def ticked() -> bool:
        browser.get(_page(server, f"/queue?name={TICKING}"))
        return bool(browser.find_elements(By.CSS_SELECTOR, "table.schedules td a"))

    wait_for(ticked, timeout=30, pause=0.5)
    (row,) = browser.find_elements(By.CSS_SELECTOR, "table.schedules tbody tr")
    cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
    assert cells[0] == "each-second"
    assert cells[1] == "every 1 s"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.000", cells[2]), cells[2]
    assert cells[3].startswith(f"{TICKING}:")
    assert cells[4] > cells[2]  # the next tick comes after the last
    link = row.find_element(By.CSS_SELECTOR, "td a")
    link.click()
    key = browser.find_element(By.CSS_SELECTOR, "code.unique-key").text
    assert re.fullmatch(r"schedule:each-second:\d+000", key), key
