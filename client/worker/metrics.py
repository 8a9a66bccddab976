"""The worker's own metrics, as `pinledger worker` serves them on /metrics (Prometheus
text format 0.0.4): the worker's catalogue, in the way the server's is
(service/observability/catalogue.py), and its rendering. Labelled by queue, so one
scrape config serves every worker of every queue; no label takes a value per job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple


class WorkerMetric(NamedTuple):
    name: str
    kind: str  # the Prometheus type
    help: str


JOBS_TOTAL: Final = "pinledger_worker_jobs_total"
HANDLER_SECONDS: Final = "pinledger_worker_handler_seconds"
IN_FLIGHT: Final = "pinledger_worker_in_flight"
SERVER_ANSWERING: Final = "pinledger_worker_server_answering"

CATALOGUE: tuple[WorkerMetric, ...] = (
    WorkerMetric(
        JOBS_TOTAL,
        "counter",
        "Handler runs that finished, by outcome (succeeded; retried: failed with attempts "
        "left; failed: for good; rescheduled), and jobs released: handed back unrun or "
        "unfinished at shutdown. A rise in failed: read the jobs' custom status "
        "(pinledger trace).",
    ),
    WorkerMetric(
        HANDLER_SECONDS,
        "summary",
        "Time the handler took, summed over finished runs (_sum) with their count "
        "(_count): rate(_sum) / rate(_count) is the mean run time.",
    ),
    WorkerMetric(
        IN_FLIGHT,
        "gauge",
        "Jobs a handler runs now; at --concurrency for long, the worker is saturated.",
    ),
    WorkerMetric(
        SERVER_ANSWERING,
        "gauge",
        "1 when the worker's last dequeue was answered, 0 while dequeues fail (the "
        "worker's log and /health say why).",
    ),
)
NAMES: frozenset[str] = frozenset(m.name for m in CATALOGUE)


class Reading(NamedTuple):
    """What the worker's counters say at one moment."""

    queue: str
    outcomes: dict[str, int]  # WorkerCounters.by_outcome()
    handler_seconds: float
    runs: int
    in_flight: int
    answering: bool


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(readings: Iterable[Reading]) -> str:
    """The exposition of every worker's reading (one per queue)."""
    readings = list(readings)
    lines: list[str] = []
    for metric in CATALOGUE:
        lines.append(f"# HELP {metric.name} {metric.help}")
        lines.append(f"# TYPE {metric.name} {metric.kind}")
        for r in readings:
            queue = f'queue="{_label(r.queue)}"'
            if metric.name == JOBS_TOTAL:
                lines.extend(
                    f'{JOBS_TOTAL}{{{queue},outcome="{outcome}"}} {count}'
                    for outcome, count in r.outcomes.items()
                )
            elif metric.name == HANDLER_SECONDS:
                lines.append(f"{HANDLER_SECONDS}_sum{{{queue}}} {r.handler_seconds!r}")
                lines.append(f"{HANDLER_SECONDS}_count{{{queue}}} {r.runs}")
            elif metric.name == IN_FLIGHT:
                lines.append(f"{IN_FLIGHT}{{{queue}}} {r.in_flight}")
            else:
                lines.append(f"{SERVER_ANSWERING}{{{queue}}} {int(r.answering)}")
    return "\n".join(lines) + "\n"


def reference_page() -> str:
    """docs/reference/worker-metrics.md: the worker's catalogue as a table."""
    lines = [
        "# Worker metrics",
        "",
        "<!-- Generated from client/worker/metrics.py by docs/generate.py:",
        "     edit the catalogue, then run `python docs/generate.py`. -->",
        "",
        "`pinledger worker ... --status-port PORT` exports these at `/metrics` in the",
        "Prometheus text format, each labelled `queue`; `/health` answers 200 while the",
        "worker dequeues and 503 once it stops ([The Python client and",
        "workers](../guides/python-client.md#pinledger-worker)). Counters start at zero",
        "when the worker starts: use `rate()` or `increase()`.",
        "",
        "| name | type | what it means |",
        "|---|---|---|",
    ]
    lines.extend(f"| `{m.name}` | {m.kind} | {m.help} |" for m in CATALOGUE)
    return "\n".join(lines) + "\n"


__all__ = ["CATALOGUE", "NAMES", "Reading", "WorkerMetric", "reference_page", "render"]
