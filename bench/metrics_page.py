"""A server's /metrics page as the benchmarks read it: the sum of a counter's series."""

from __future__ import annotations

from pinledger.service.testing.servers import ServerProcess


def counter_sum(text: str, name: str) -> float:
    """The sum of every series of counter `name` in a /metrics page (0 when none is
    written yet: a counter is written from its first increment)."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ")
    )


def metrics_page(server: ServerProcess) -> str:
    with server.admin_get("/metrics") as answer:
        text: str = answer.read().decode()
        return text
