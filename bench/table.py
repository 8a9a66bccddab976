"""The printed report: the setup, then one row per measure with its target and, where
the peer ran the same workload, its figure and the ratio pinledger/peer."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Row:
    measure: str
    value: float
    unit: str
    # ">= 3000" or "<= 5": the target on a 2-core machine; "" when none.
    target: str = ""
    peer: float | None = None

    @property
    def met(self) -> str:
        if not self.target or math.isnan(self.value):
            return ""
        sign, number = self.target.split()
        ok = self.value >= float(number) if sign == ">=" else self.value <= float(number)
        return "yes" if ok else "NO"

    @property
    def ratio(self) -> str:
        if self.peer is None or not self.peer or math.isnan(self.value):
            return ""
        return f"{self.value / self.peer:.2f}x"


def _number(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def _grid(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def render(setup: list[tuple[str, str]], rows: list[Row], peer_name: str) -> str:
    setup_text = _grid(["setup", "value"], [[k, v] for k, v in setup], set())
    body = [
        [
            r.measure,
            _number(r.value),
            r.unit,
            r.target,
            r.met,
            "" if r.peer is None else _number(r.peer),
            r.ratio,
        ]
        for r in rows
    ]
    results = _grid(
        ["measure", "pinledger", "unit", "target", "met", peer_name, "pinledger/peer"],
        body,
        {1, 5, 6},
    )
    return f"{setup_text}\n\n{results}"
