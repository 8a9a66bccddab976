"""docs/state_machine.md draws the transition table; the drawing must not drift."""

from __future__ import annotations

import re
from pathlib import Path

from pinledger.ledger import events
from pinledger.ledger.state import TRANSITIONS, JobState

DOC = Path(__file__).resolve().parents[2] / "docs" / "state_machine.md"
MERMAID_BLOCK = re.compile(r"```mermaid\n(.*?)```", re.DOTALL)
EDGE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)\s*:\s*(\w+)\s*$")

Edge = tuple[JobState | None, type, JobState | None]


def _state(name: str) -> JobState | None:
    return None if name == "[*]" else JobState[name]


def doc_edges() -> list[Edge]:
    blocks = MERMAID_BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 1, "the doc should hold exactly one mermaid diagram"
    lines = blocks[0].splitlines()
    assert lines[0].strip() == "stateDiagram-v2"
    edges = []
    for line in lines[1:]:
        if not line.strip():
            continue
        match = EDGE.match(line)
        assert match, f"not an edge 'A --> B : Event': {line!r}"
        before, after, label = match.groups()
        edges.append((_state(before), getattr(events, label), _state(after)))
    return edges


def test_diagram_edges_are_exactly_the_transition_table() -> None:
    edges = doc_edges()
    table = {
        (before, kind, after)
        for (before, kind), targets in TRANSITIONS.items()
        for after in targets
    }
    assert len(edges) == len(set(edges)), "an edge is drawn twice"
    assert set(edges) == table


def test_every_state_is_documented_in_the_states_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    for state in JobState:
        assert f"| {state.name} ({state.value}) |" in text
