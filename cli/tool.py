"""`pinledger client`: PinLater's client tool, for checking a server by hand and for
load tests. Same flags as PinLaterClientTool:

    pinledger client --mode create --queue emails
    pinledger client --mode enqueue --queue emails --num_queries 1000 --batch_size 10 \
        --concurrency 4
    pinledger client --mode dequeue --queue emails --num_queries -1 \
        --dequeue_success_percent 90
    pinledger client --mode get_job_count --queue emails --job_state 0

The mode may also come first without `--mode` (`pinledger client lookup ...`).

Load modes (enqueue, dequeue, check_dequeue) issue `--num_queries` calls (-1: until
Ctrl-C) from `--concurrency` threads, `--batch_size` jobs per call, print calls/s,
jobs/s and latency percentiles every second and a summary at the end. dequeue acks
each job it receives (success with probability `--dequeue_success_percent`) on its
thread's next dequeue, as a worker would; acks still pending at the end are sent in
one last ack call. check_dequeue is a dryRun dequeue: it shows runnable jobs without
claiming them.

Exit status: 0 when every call succeeded, 1 when the server refused a call or could
not be reached (the message names PinLater's ErrorCode), 2 for bad arguments.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from pinledger.cli.load_run import LoadRun
from pinledger.cli.tool_options import LOAD_MODES, Options, UsageError, parse_options
from pinledger.cli.tool_text import body_text, error_line
from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.client.jobs import JobInfo
from pinledger.ledger.times import format_ms

# ---------------------------------------------------------------- one-call modes


def _time(ms: int | None) -> str:
    return format_ms(ms, zulu=True)


def _priority_of(descriptor: str) -> str:
    parts = descriptor.split(":")
    return parts[2][1:] if len(parts) == 4 and parts[2].startswith("p") else "?"


def describe(info: JobInfo) -> list[str]:
    return [
        f"job {info.descriptor}",
        f"  state            {info.state.name}",
        f"  priority         {_priority_of(info.descriptor)}",
        f"  attempts         {info.attempts_remaining} of {info.attempts_allowed} left",
        f"  created          {_time(info.created_at_ms)}",
        f"  run after        {_time(info.run_after_ms)}",
        f"  updated          {_time(info.updated_at_ms)}",
        f"  claim            {info.claim or '-'}",
        f"  custom status    {info.custom_status!r}",
        f"  body             {body_text(info.body, 200)}",
    ]


def _scope(o: Options) -> str:
    priority = "all priorities" if o.priority is None else f"priority {o.priority}"
    when = "runnable later" if o.count_future_jobs else "runnable now"
    regex = f", body ~ {o.body_regex!r}" if o.body_regex else ""
    return f"{priority}, {when}{regex}"


Say = Callable[[str], None]


def _create(client: PinLaterClient, o: Options, say: Say) -> int:
    client.create_queue(o.queue or "")
    say(f"created queue {o.queue} (or it existed)")
    return 0


def _queue_names(client: PinLaterClient, o: Options, say: Say) -> int:
    names = sorted(client.queue_names())
    say(f"{len(names)} queue(s)")
    for name in names:
        say(f"  {name}")
    return 0


def _lookup(client: PinLaterClient, o: Options, say: Say) -> int:
    found = client.lookup(o.job_descriptors, include_body=True)
    for descriptor in o.job_descriptors:
        if descriptor in found:
            for line in describe(found[descriptor]):
                say(line)
        else:
            say(f"job {descriptor}: not found")
    return 0 if len(found) >= len(set(o.job_descriptors)) else 1


def _count(client: PinLaterClient, o: Options, say: Say) -> int:
    count = client.count(
        o.queue or "",
        o.job_state,
        priority=o.priority,
        count_future=o.count_future_jobs,
        body_regex=o.body_regex,
    )
    say(f"{count} {o.job_state.name} job(s) in queue {o.queue} ({_scope(o)})")
    return 0


def _scan(client: PinLaterClient, o: Options, say: Say) -> int:
    page = client.scan(
        o.queue or "",
        o.job_state,
        priority=o.priority,
        future=o.count_future_jobs,
        continuation=o.continuation,
        limit=o.limit or 100,
        body_regex=o.body_regex,
    )
    say(f"{len(page.jobs)} {o.job_state.name} job(s) in queue {o.queue} ({_scope(o)})")
    if page.jobs:
        say(f"  {'descriptor':<40} {'attempts':>8}  {'run after':<24} custom status")
    for info in page.jobs:
        attempts = f"{info.attempts_remaining}/{info.attempts_allowed}"
        say(
            f"  {info.descriptor:<40} {attempts:>8}  {_time(info.run_after_ms):<24} "
            f"{info.custom_status!r}"
        )
    if page.more:
        say(f"more: --continuation {page.continuation}")
    return 0


def _retry_failed(client: PinLaterClient, o: Options, say: Say) -> int:
    priority, attempts = o.priority or 1, o.attempts or 1
    retried = client.retry_failed(
        o.queue or "", priority=priority, attempts=attempts, limit=o.limit or 1000
    )
    say(
        f"retried {retried} FAILED job(s) of priority {priority} in queue {o.queue} "
        f"({attempts} attempt(s) each)"
    )
    return 0


def _delete_jobs(client: PinLaterClient, o: Options, say: Say) -> int:
    priority = o.priority or 1
    deleted = client.delete_jobs(
        o.queue or "",
        o.job_state,
        priority=priority,
        body_regex=o.body_regex,
        limit=o.limit or 1000,
    )
    say(f"deleted {deleted} {o.job_state.name} job(s) of priority {priority} in queue {o.queue}")
    return 0


def _delete_queue(client: PinLaterClient, o: Options, say: Say) -> int:
    client.delete_queue(o.queue or "", _password(o))
    say(f"deleted queue {o.queue} (or it did not exist)")
    return 0


SINGLE_MODES: dict[str, Callable[[PinLaterClient, Options, Say], int]] = {
    "create": _create,
    "get_queue_names": _queue_names,
    "lookup": _lookup,
    "get_job_count": _count,
    "scan": _scan,
    "retry_failed": _retry_failed,
    "delete_jobs": _delete_jobs,
    "delete_queue": _delete_queue,
}


def run_single(client: PinLaterClient, o: Options, out: TextIO) -> int:
    return SINGLE_MODES[o.mode](client, o, lambda text: print(text, file=out))


def _password(o: Options) -> str:
    if o.password is not None:
        return o.password
    if os.environ.get("PINLEDGER_PASSWORD"):
        return os.environ["PINLEDGER_PASSWORD"]
    if sys.stdin.isatty():
        return getpass.getpass("admin password: ")
    raise UsageError("delete_queue needs the admin password: --password or $PINLEDGER_PASSWORD")


# ---------------------------------------------------------------- entry point


def connect(o: Options) -> PinLaterClient:
    servers = o.server_list or f"{o.host}:{o.port}"
    return PinLaterClient(
        servers,
        source=f"pinledger-client:{socket.gethostname()}",
        timeout_s=o.timeout,
        pool_size=max(8, o.concurrency),
        tls=o.tls,
    )


def main(
    argv: Sequence[str] | None = None,
    out: TextIO | None = None,
    connector: Callable[[Options], PinLaterClient] = connect,
) -> int:
    out = out or sys.stdout
    try:
        o = parse_options(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"pinledger client: {exc}", file=sys.stderr)
        return 2
    try:
        client = connector(o)
    except ClientError as exc:
        print(f"pinledger client: {error_line(exc)}", file=sys.stderr)
        return 1
    try:
        if o.mode in LOAD_MODES:
            return LoadRun(client, o, out).run()
        return run_single(client, o, out)
    except UsageError as exc:
        print(f"pinledger client: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"pinledger client: {error_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pinledger client: interrupted", file=sys.stderr)
        return 130
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
