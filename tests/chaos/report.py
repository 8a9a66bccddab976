"""The chaos suite's table: one row per fault, printed at the end of the test run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Row:
    fault: str
    jobs: int  # acknowledged enqueues
    lost: int  # acknowledged enqueues not SUCCEEDED after the drain
    duplicate_runs: int  # runs beyond the first (at-least-once)
    recovered_s: float  # seconds until every partition was served again
    # "repair" (the dependency answers again), "fault", or what else the case names
    # (a skip of a poison record, a queue's deletion)
    measured_from: str
    failed_calls: int
    longest_failed_call_s: float
    # What the failed calls answered: first 110 characters, with their counts.
    answers: Counter[str] = field(default_factory=Counter)
    # What else the case measured or counted, a line each.
    details: list[str] = field(default_factory=list)


ROWS: list[Row] = []


def table(rows: list[Row]) -> list[str]:
    head = (
        f"{'fault':<44} {'jobs':>6} {'lost':>5} {'dup runs':>8} "
        f"{'recover s':>9} {'from':<6} {'failed':>6} {'longest':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.fault:<44} {r.jobs:>6} {r.lost:>5} {r.duplicate_runs:>8} "
            f"{r.recovered_s:>9.1f} {r.measured_from:<6} {r.failed_calls:>6} "
            f"{r.longest_failed_call_s:>6.1f}s"
        )
    lines.append("")
    lines.append("what the failed calls answered (count x first words):")
    for r in rows:
        lines.append(f"  {r.fault}:")
        for answer, count in r.answers.most_common(4):
            lines.append(f"    {count:>5} x {answer}")
        if not r.answers:
            lines.append("    (no call failed)")
        lines += [f"    - {detail}" for detail in r.details]
    return lines
