"""Browser tests of the dashboard: headless Chromium (Debian's chromium and
chromium-driver, installed by .ci/run) through Selenium, against a real `pinledger
serve` on the real stack. A missing browser or driver FAILS the tests with a message
saying what to install; it never skips them. Each test saves a screenshot under
test-output/browser/ (ignored by git)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.security.password import hash_password
from pinledger.service.testing.servers import ROOT, ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.integration]

OUTPUT = ROOT / "test-output" / "browser"
PASSWORD = "dashboard-pw"
# A periodic job (decision 0038) on a queue the schedules test creates.
TICKING = "ticking"
QUEUE_CONFIG = {
    "queues": [
        {
            "name": TICKING,
            "queueConfig": {
                "schedules": [{"name": "each-second", "everySeconds": 1, "body": "tick"}]
            },
        }
    ]
}
SALT = "pepper"


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.fail(
            "the browser tests need Chromium and its driver: "
            "apt-get install -y --no-install-recommends chromium chromium-driver "
            f"(found chromium={browser}, chromedriver={driver})"
        )
    return browser, driver


@pytest.fixture
def browser(
    chromium: tuple[str, str], request: pytest.FixtureRequest
) -> Iterator[webdriver.Chrome]:
    binary, driver_path = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(OUTPUT / f"{request.node.name}.png"))
        driver.quit()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module's tests (each test uses its own queue)."""
    config = Config.from_env()
    prefix = f"browser{uuid.uuid4().hex[:8]}."
    schema = f"browser_{uuid.uuid4().hex[:8]}"
    logs = Path(tmp_path_factory.mktemp("browser-logs"))
    queue_config = logs / "queues.json"
    queue_config.write_text(json.dumps(QUEUE_CONFIG), encoding="utf-8")
    process = ServerProcess(
        prefix,
        schema,
        settings={
            "PINLEDGER_QUEUE_CONFIG": str(queue_config),
            "PINLEDGER_CLAIM_TIMEOUT_S": "2",
            # A resized queue's empty partitions retire within seconds.
            "PINLEDGER_RETIRE_AFTER_S": "3",
            "PINLEDGER_ADMIN_PASSWORD_SHA256": hash_password(PASSWORD, SALT),
            "PINLEDGER_ADMIN_SALT": SALT,
            "PINLEDGER_TRACE_URL_TEMPLATE": "https://traces.example/trace/{trace_id}",
        },
    )
    process.start(logs)
    try:
        yield process
    finally:
        process.stop()
        kafka = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id="browser-tests"))
        try:
            for topic in kafka.topics():
                if topic.startswith(prefix):
                    kafka.delete_topic(topic)
        finally:
            kafka.close()
        Store(config.pg_dsn, schema).drop()
