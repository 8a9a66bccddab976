"""Prometheus expositions of several processes as one, each series labelled with the
process it came from (`process="0"`, ...): the server's `serve --processes` supervisor
(service/processes/) and the worker runner's `--processes` (client/worker/processes.py)
answer one /metrics for all their processes with it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{?)")


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
