"""The printed report: the setup, then one row per measure with its target and, where
a peer ran the same workload, its figure and the ratio pinledger/peer (one pair of
columns per peer); then the CPU per job of each system's processes, phase by phase,
and pinledger's whole-system CPU per job over each peer's."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.cpu import WHOLE_SYSTEM


@dataclass(frozen=True, slots=True)
class Row:
    measure: str
    value: float
    unit: str
    # ">= 3000" or "<= 5": the target on a 2-core machine; "" when none.
    target: str = ""
    # One figure per peer, in the order of the peers' columns; None where that peer
    # did not run this workload.
    peers: tuple[float | None, ...] = ()

    @property
    def met(self) -> str:
        if not self.target or math.isnan(self.value):
            return ""
        sign, number = self.target.split()
        ok = self.value >= float(number) if sign == ">=" else self.value <= float(number)
        return "yes" if ok else "NO"

    def peer(self, index: int) -> float | None:
        return self.peers[index] if index < len(self.peers) else None

    def ratio(self, index: int) -> str:
        peer = self.peer(index)
        if peer is None or not peer or math.isnan(self.value):
            return ""
        return f"{self.value / peer:.2f}x"


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


def _peer_cells(row: Row, count: int) -> list[str]:
    cells: list[str] = []
    for i in range(count):
        peer = row.peer(i)
        cells += ["" if peer is None else _number(peer), row.ratio(i)]
    return cells


def render(
    setup: list[tuple[str, str]],
    rows: list[Row],
    peer_names: list[str],
    cpu: list[tuple[str, list[float | str | None]]] | None = None,
    phases: list[str] | None = None,
    cpu_ratios: list[tuple[str, list[float | str | None]]] | None = None,
) -> str:
    """The setup, the results, and (given `cpu` rows, one value per phase) the CPU
    per job table; then (given `cpu_ratios`) pinledger's whole-system CPU per job
    against each peer's, phase by phase."""
    setup_text = _grid(["setup", "value"], [[k, v] for k, v in setup], set())
    header = ["measure", "pinledger", "unit", "target", "met"]
    for name in peer_names:
        header += [name, "pinledger/peer" if len(peer_names) == 1 else f"pinledger/{name}"]
    body = [
        [r.measure, _number(r.value), r.unit, r.target, r.met, *_peer_cells(r, len(peer_names))]
        for r in rows
    ]
    right = {1, *range(5, len(header))}
    parts = [setup_text, _grid(header, body, right)]
    if cpu and phases:
        cells = [[name, *(_cpu_cell(v) for v in values)] for name, values in cpu]
        parts.append(_grid(["CPU us per job", *phases], cells, set(range(1, len(phases) + 1))))
    if cpu_ratios and phases:
        cells = [[name, *(_cpu_cell(v) for v in values)] for name, values in cpu_ratios]
        header = [WHOLE_SYSTEM, *phases]
        parts.append(_grid(header, cells, set(range(1, len(phases) + 1))))
    return "\n\n".join(parts)


def _cpu_cell(value: float | str | None) -> str:
    """A phase the system did not run is blank (""); a group not found is n/a."""
    if isinstance(value, str):
        return value
    return "n/a" if value is None else _number(value)
