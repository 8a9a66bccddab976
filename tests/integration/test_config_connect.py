"""`pinledger config --check --connect` against the stack: Kafka and the store take the
client it is configured as, and a store that refuses it is one line naming the store,
without the password it refused."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from pinledger.service.testing.servers import run_pinledger
from tests.settings import stack_settings

pytestmark = pytest.mark.integration

WRONG_PASSWORD = "not-the-Password-5a1f"


def test_the_stack_takes_the_configured_client() -> None:
    stack = stack_settings()
    done = run_pinledger(
        "config", "--check", "--connect", PINLEDGER_KAFKA=stack.kafka, PINLEDGER_PG_DSN=stack.pg_dsn
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("store at postgresql://") and "takes this client" in lines[0]
    assert lines[1].startswith(f"Kafka at {stack.kafka}: ") and "answered" in lines[1]
    assert lines[2].startswith("valid: ")


def test_a_refused_password_is_one_line_without_the_password() -> None:
    stack = stack_settings()
    url = urlsplit(stack.pg_dsn)
    host = url.netloc.rpartition("@")[2]
    wrong = url._replace(netloc=f"{url.username}:{WRONG_PASSWORD}@{host}").geturl()
    done = run_pinledger(
        "config",
        "--check",
        "--connect",
        "--json",
        PINLEDGER_KAFKA=stack.kafka,
        PINLEDGER_STORE_DSN=wrong,
    )
    assert done.returncode == 1
    assert WRONG_PASSWORD not in done.stdout + done.stderr
    assert '"valid": false' in done.stdout
    assert "store: Postgres refused the connection: the password was refused" in done.stdout
