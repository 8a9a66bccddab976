"""Every test finds the servers through tests/settings.py, which falls back to the
stack's defaults: a test that read os.environ["PINLEDGER_KAFKA"] itself raised KeyError
under `make test` in a shell that had not exported the stack's variables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pinledger.service.config import DEFAULT_KAFKA, DEFAULT_PG_DSN
from tests import settings

TESTS = Path(__file__).resolve().parents[1]
# A direct read of a server's address: os.environ["PINLEDGER_X"], .get("PINLEDGER_X"),
# getenv("PINLEDGER_X") for the Kafka, Postgres, MySQL or store settings.
DIRECT_READ = re.compile(
    r"""(environ\s*\[|environ\.get\(|getenv\()\s*["']PINLEDGER_(KAFKA|PG_DSN|MYSQL_DSN|STORE_DSN)["']"""
)


def test_no_test_reads_a_server_address_from_the_environment_itself() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in ("settings.py", "test_test_settings.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DIRECT_READ.search(line)
    ]
    assert offenders == [], f"use tests.settings.stack_settings() instead: {offenders}"


def test_with_no_settings_the_tests_use_the_stacks_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("PINLEDGER_KAFKA", "PINLEDGER_PG_DSN", "PINLEDGER_MYSQL_DSN", "PINLEDGER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    settings.stack_settings.cache_clear()
    try:
        found = settings.stack_settings()
    finally:
        settings.stack_settings.cache_clear()
    assert (found.kafka, found.pg_dsn, found.mysql_dsn) == (
        DEFAULT_KAFKA,
        DEFAULT_PG_DSN,
        settings.DEFAULT_MYSQL_DSN,
    )


def test_the_environment_names_other_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINLEDGER_KAFKA", "10.0.0.9:9092")
    monkeypatch.setenv("PINLEDGER_MYSQL_DSN", "mysql://u:p@db:3306/x")
    settings.stack_settings.cache_clear()
    try:
        found = settings.stack_settings()
    finally:
        settings.stack_settings.cache_clear()
    assert (found.kafka, found.mysql_dsn) == ("10.0.0.9:9092", "mysql://u:p@db:3306/x")
