"""One host, one admin port: the supervisor's /metrics, /stats.txt and /health put
its workers' answers together, each series labelled with the worker it came from
(`process="0"`, ...), so sums and per-process views are both a query away. The
Prometheus half is pinledger/exposition.py, which the worker runner shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_SECTIONS = ("counters:", "gauges:", "metrics:")


def label_stats_line(line: str, index: int) -> str:
    """`  name{a=b}: 1` -> `  name{process=0,a=b}: 1` (Ostrich layout)."""
    body = line.strip()
    name, sep, rest = body.partition(":")
    if not sep:
        return line
    if name.endswith("}") and "{" in name:
        base, _, labels = name.partition("{")
        name = f"{base}{{process={index},{labels}"
    else:
        name = f"{name}{{process={index}}}"
    return f"  {name}:{rest}"


def merge_stats_txt(texts: Mapping[int, str]) -> str:
    """The workers' /stats.txt as one, section by section."""
    sections: dict[str, list[str]] = {section: [] for section in _SECTIONS}
    for index, text in sorted(texts.items()):
        current: list[str] | None = None
        for line in text.splitlines():
            if line in sections:
                current = sections[line]
            elif line.strip() and current is not None:
                current.append(label_stats_line(line, index))
    lines: list[str] = []
    for section, entries in sections.items():
        lines.append(section)
        lines.extend(entries)
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True, slots=True)
class WorkerView:
    """What the supervisor knows of a worker, for the health page."""

    index: int
    pid: int | None  # None while it waits to be started again
    admin_port: int
    peer_port: int
    restarts: int


def host_health(
    workers: list[WorkerView], answers: Mapping[int, tuple[int, str]]
) -> tuple[int, dict[str, object]]:
    """The host's health from each worker's (HTTP status, summary): 200 when every
    worker answered 200; otherwise 503 naming the workers that did not."""
    checks: dict[str, str] = {}
    details: dict[str, object] = {}
    for worker in workers:
        name = f"process-{worker.index}"
        status, summary = answers.get(worker.index, (0, "not running (being restarted)"))
        checks[name] = "ok" if status == 200 else summary
        details[str(worker.index)] = {
            "pid": worker.pid,
            "admin_port": worker.admin_port,
            "peer_port": worker.peer_port,
            "restarts": worker.restarts,
        }
    ok = bool(workers) and all(value == "ok" for value in checks.values())
    body: dict[str, object] = {
        "status": "ok" if ok else "failing",
        "checks": checks,
        "processes": details,
    }
    return (200 if ok else 503), body
