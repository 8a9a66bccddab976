"""One host, one admin port: the supervisor's /metrics, /stats.txt and /health put
its workers' answers together, each series labelled with the worker it came from
(`process="0"`, ...), so sums and per-process views are both a query away."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{?)")
_SECTIONS = ("counters:", "gauges:", "metrics:")


def label_prometheus(line: str, label: str) -> str:
    """`name{a="b"} 1` -> `name{process="0",a="b"} 1` (label is `process="0"`)."""
    match = _SAMPLE.match(line)
    if match is None:
        return line
    name, brace = match.group(1), match.group(2)
    rest = line[match.end() :]
    if not brace:
        return f"{name}{{{label}}}{rest}"
    separator = "" if rest.startswith("}") else ","  # `name{}` has no labels to follow
    return f"{name}{{{label}{separator}{rest}"


@dataclass
class _Family:
    kind: str = "untyped"
    help: str | None = None
    samples: list[str] = field(default_factory=list)


def merge_prometheus(texts: Mapping[int, str]) -> str:
    """The workers' expositions as one: each family's HELP and TYPE lines once (the
    first worker's: every worker writes them from the same catalogue), then its samples
    from every worker (the format wants a family's samples together)."""
    families: dict[str, _Family] = {}
    for index, text in sorted(texts.items()):
        label = f'process="{index}"'
        current: _Family | None = None
        for line in text.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                _, word, name, said = [*line.split(" ", 3), ""][:4]
                current = families.setdefault(name, _Family())
                if word == "TYPE":
                    current.kind = said
                elif current.help is None:
                    current.help = said
            elif line and not line.startswith("#"):
                if current is None:
                    current = families.setdefault("", _Family())
                current.samples.append(label_prometheus(line, label))
    lines: list[str] = []
    for name, family in families.items():
        if name:
            if family.help is not None:
                lines.append(f"# HELP {name} {family.help}")
            lines.append(f"# TYPE {name} {family.kind}")
        lines.extend(family.samples)
    return "".join(line + "\n" for line in lines)


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
