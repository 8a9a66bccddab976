"""`pinledger trace <descriptor>`: one job's history from a server (getJobHistory).

Human-readable by default: one line per step (time, action, actor, claim, attempt,
status change, state after, verdict), then each attempt's latency breakdown. `--json`
prints the same as JSON; `--at <offset>` shows the job as of that step.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.idl import pinlater
from pinledger.ledger import descriptor
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.times import format_ms
from pinledger.projections.history import JobHistory, Step, to_json
from pinledger.service.api.history import from_thrift
from pinledger.service.config import Config
from pinledger.service.observability import trace_export
from pinledger.service.security.tls import peer_context


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("descriptor", help="the job's descriptor (queue:s<p>:p<prio>:<id>)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--at", type=int, metavar="OFFSET", help="the job as of the step at this offset"
    )
    parser.add_argument(
        "--server", help="host:port of a pinledger server (default: this config's port)"
    )
    parser.add_argument(
        "--otlp",
        action="store_true",
        help="export the job's life as a trace (root span, a span per attempt, an event per "
        "step) to the OTLP/HTTP endpoint of OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT "
        "(default http://localhost:4318)",
    )


def fetch_history(
    client: PinLaterClient, job: JobDescriptor, at_offset: int | None = None
) -> JobHistory:
    """The job's history from a server, as a JobHistory. A PinLater descriptor of an
    imported job gives the history of the job it became, under its new descriptor."""
    request = pinlater.PinLaterJobHistoryRequest(jobDescriptor=str(job), atOffset=at_offset)
    response = client.call("getJobHistory", request, idempotent=True)
    return from_thrift(descriptor.parse(response.jobDescriptor), response)


def _span(ms: int | None) -> str:
    if ms is None:
        return "-"
    return f"{ms}ms" if abs(ms) < 1000 else f"{ms / 1000:.3f}s"


def _actor(step: Step) -> str:
    actor = step.source or "?"
    if step.request_id:
        actor += f" [{step.request_id}]"
    return f"{actor} via {step.server}" if step.server else actor


def _step_line(step: Step) -> str:
    status = (
        ""
        if step.status_change is None
        else (f" status {step.status_change.kind} {step.status_change.text!r}")
    )
    if step.state_after is None:
        after = "removed"
    else:
        after = f"{step.state_after.name} ({step.attempts_remaining_after} attempts left)"
    verdict = "applied" if step.applied else f"REJECTED: {step.reason}"
    return (
        f"  {format_ms(step.at)}  @{step.offset}.{step.idx}  {step.action:<12} "
        f"attempt {step.attempt}  by {_actor(step)}  claim {step.claim or '-'}{status}"
        f"  -> {after}  {verdict}"
    )


def render(history: JobHistory, at_offset: int | None = None) -> str:
    """The human-readable trace."""
    lines = [
        f"job {history.descriptor}" + ("" if at_offset is None else f" as of offset {at_offset}")
    ]
    if not history.steps:
        lines.append("  no history in the ledger")
        return "\n".join(lines)
    job = history.job
    if job is None:
        lines.append("  state: removed (deleted or collected)")
    else:
        lines.append(
            f"  state: {job.state.name}, {job.attempts_remaining} of {job.attempts_allowed} "
            f"attempts left, priority {job.priority}, run after {format_ms(job.run_after)}, "
            f"claim {job.claim or '-'}, custom status {job.custom_status!r}, "
            f"body {job.body_bytes} bytes"
        )
    lines.append(f"steps ({len(history.steps)}):")
    lines += [_step_line(step) for step in history.steps]
    lines.append(f"attempts ({len(history.attempts)}):")
    for a in history.attempts:
        line = (
            f"  #{a.number} {a.outcome.value:<13} claimed {format_ms(a.claimed_at)} "
            f"({a.claim})  queued {_span(a.queued_ms)}  running {_span(a.running_ms)}"
        )
        if a.retry_delay_ms is not None:
            line += f"  retry delay {_span(a.retry_delay_ms)}"
        if a.timeout_lost_ms:
            line += f"  lost to timeout {_span(a.timeout_lost_ms)}"
        lines.append(line)
    lines.append(_totals(history))
    return "\n".join(lines)


def _totals(history: JobHistory) -> str:
    queued = sum(a.queued_ms for a in history.attempts)
    running = sum(a.running_ms or 0 for a in history.attempts)
    delays = sum(a.retry_delay_ms or 0 for a in history.attempts)
    lost = sum(a.timeout_lost_ms for a in history.attempts)
    line = (
        f"totals: initial delay {_span(history.initial_delay_ms)}, queued {_span(queued)}, "
        f"running {_span(running)}, retry delays {_span(delays)}, "
        f"lost to timeouts {_span(lost)}"
    )
    if history.finished_at is not None and history.enqueued_at is not None:
        line += f"; enqueue to finish {_span(history.finished_at - history.enqueued_at)}"
    return line


def run(config: Config, args: argparse.Namespace) -> int:
    job = descriptor.parse(args.descriptor)
    server = args.server or f"127.0.0.1:{config.port}"
    try:
        # With the server's own settings, over its TLS as a server would forward.
        tls = peer_context(config)
        with PinLaterClient(server, source="pinledger-trace", tls=tls) as client:
            history = fetch_history(client, job, args.at)
    except ClientError as exc:
        print(f"pinledger trace: {exc}", file=sys.stderr)
        return 2
    if args.otlp:
        return trace_export.run(history)
    if args.json:
        data: dict[str, Any] = to_json(history)
        data["as_of_offset"] = args.at
        print(json.dumps(data, indent=2))
    else:
        if history.descriptor != str(job):
            print(f"{job} is the PinLater descriptor of an imported job")
        print(render(history, args.at))
    return 0 if history.steps else 1
