"""A server refuses a port another process listens on, with one line saying so: with
SO_REUSEPORT (which thriftpy2 sets on every listening socket) a second `pinledger
serve` used to share the port quietly, even one on another ledger, and clients were
spread between the two at random. Only the workers of one `serve --processes` share it."""

from __future__ import annotations

from typing import Any

import pytest

from pinledger.service.testing.servers import ServerProcess, context, free_port, run_pinledger

pytestmark = pytest.mark.integration


def _refused(done: Any, port: int) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"127.0.0.1:{port} is already in use by another process" in lines[0]
    assert "PINLEDGER_PORT" in lines[0]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_second_server_on_a_port_in_use_exits_with_one_clear_line(
    server: ServerProcess, client: Any, processes: str
) -> None:
    done = run_pinledger(
        "serve",
        "--processes",
        processes,
        timeout=60,
        PINLEDGER_PORT=str(server.port),
        PINLEDGER_ADMIN_PORT=str(free_port()),
        PINLEDGER_TOPIC_PREFIX="dupB.",
        PINLEDGER_SCHEMA="dup_b",
    )
    _refused(done, server.port)
    # The first server is undisturbed.
    name = f"q_port_{free_port()}"
    client.createQueue(context(), name)
    assert name in client.getQueueNames(context())
