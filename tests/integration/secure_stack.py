"""The stack's secure Kafka node, Postgres and MariaDB (`bash stack/stack.sh secure up`),
for the tests that need a Kafka requiring TLS and SASL or databases requiring TLS:
started when they are not running (the tests fail, never skip, when they cannot be),
their export lines as a dict."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pinledger.service.testing.servers import ROOT

STACK_LIMIT_S = 300


def secure_up() -> dict[str, str]:
    done = subprocess.run(
        ["bash", str(ROOT / "stack" / "stack.sh"), "secure", "up"],
        capture_output=True,
        text=True,
        timeout=STACK_LIMIT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"`stack.sh secure up` failed (exit {done.returncode}):\n{done.stderr}")
    found = {}
    for line in done.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        # The script quotes each value for the shell (printf %q: a DSN's ? and &).
        [found[name]] = shlex.split(value)
    return found


def sasl_password(secure: dict[str, str]) -> str:
    return Path(secure["PINLEDGER_KAFKA_SASL_PASSWORD_FILE"]).read_text().strip()
