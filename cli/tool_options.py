"""`pinledger client`'s arguments: the modes, the parser, `Options` and the checks that
turn arguments that cannot work into a `UsageError`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from pinledger.client.jobs import JobState
from pinledger.client.tls import Tls

MODES = (
    "create",
    "enqueue",
    "dequeue",
    "check_dequeue",
    "lookup",
    "get_job_count",
    "get_queue_names",
    "scan",
    "retry_failed",
    "delete_jobs",
    "delete_queue",
)
LOAD_MODES = frozenset({"enqueue", "dequeue", "check_dequeue"})


class UsageError(ValueError):
    """The arguments cannot work; the message says which and why."""


def parse_state(text: str) -> JobState:
    """A job state by number (PinLater's 0-3) or by name, any case."""
    try:
        return JobState(int(text)) if text.strip().isdigit() else JobState[text.strip().upper()]
    except (KeyError, ValueError):
        names = ", ".join(f"{s.value}={s.name}" for s in JobState)
        raise argparse.ArgumentTypeError(f"unknown job state {text!r} (one of {names})") from None


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinledger client",
        description="Talk to a pinledger (or PinLater) server: PinLater's client tool.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="modes: " + ", ".join(MODES),
    )
    parser.add_argument("positional_mode", nargs="?", metavar="MODE", help="same as --mode")
    parser.add_argument("--mode", help="one of: " + ", ".join(MODES))
    where = parser.add_argument_group("server")
    where.add_argument("--host", default="127.0.0.1", help="server host (default 127.0.0.1)")
    where.add_argument("--port", type=int, default=9010, help="server port (default 9010)")
    where.add_argument(
        "--server_list", help="a file of host:port lines (re-read on change); overrides --host"
    )
    where.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for an answer (default 30)"
    )
    secure = parser.add_argument_group("TLS (a server with PINLEDGER_TLS_CERTFILE)")
    secure.add_argument(
        "--tls", action="store_true", help="connect over TLS, trusting the system's CAs"
    )
    secure.add_argument(
        "--tls_cafile", help="connect over TLS, trusting these CA certificates (PEM)"
    )
    secure.add_argument(
        "--tls_certfile",
        help="the client certificate (PEM), for a server with PINLEDGER_TLS_CLIENT_CAFILE",
    )
    secure.add_argument("--tls_keyfile", help="the client certificate's key (PEM)")
    parser.add_argument("--queue", help="queue name")
    load = parser.add_argument_group("load modes (enqueue, dequeue, check_dequeue)")
    load.add_argument("--concurrency", type=int, default=1, help="threads issuing calls")
    load.add_argument("--batch_size", type=int, default=1, help="jobs per call")
    load.add_argument(
        "--num_queries", type=int, default=1, help="calls to issue in all; -1 = until Ctrl-C"
    )
    load.add_argument(
        "--dequeue_success_percent",
        type=int,
        default=100,
        help="percent of dequeued jobs acked as succeeded; the rest fail (default 100)",
    )
    load.add_argument("--body", help="body of enqueued jobs (default: task_<random number>)")
    load.add_argument(
        "--delay_ms", type=int, default=0, help="enqueued jobs become runnable this much later"
    )
    jobs = parser.add_argument_group("job selection")
    jobs.add_argument(
        "--job_descriptor",
        action="append",
        default=[],
        help="a job to look up (repeatable, or comma separated)",
    )
    jobs.add_argument(
        "--priority",
        type=int,
        help="priority: of enqueued jobs (default 1); filter of counts and scans "
        "(default all); of retried or deleted jobs (default 1)",
    )
    jobs.add_argument(
        "--job_state",
        type=parse_state,
        default=JobState.PENDING,
        help="0/PENDING, 1/IN_PROGRESS, 2/SUCCEEDED, 3/FAILED (default 0)",
    )
    jobs.add_argument(
        "--count_future_jobs",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="count or scan jobs runnable later instead of now (true/false)",
    )
    jobs.add_argument("--body_regex", help="only jobs whose body matches (a Postgres regex)")
    jobs.add_argument("--limit", type=int, help="most jobs to scan (100), retry or delete (1000)")
    jobs.add_argument("--continuation", default="0", help="scan: continue from this token")
    jobs.add_argument(
        "--attempts",
        type=int,
        help="attempts of enqueued jobs (default 2) or of retried jobs (default 1)",
    )
    parser.add_argument(
        "--password", help="delete_queue: the admin password (default: ask, or $PINLEDGER_PASSWORD)"
    )
    return parser


@dataclass(frozen=True, slots=True)
class Options:
    mode: str
    host: str
    port: int
    server_list: str | None
    timeout: float
    queue: str | None
    concurrency: int
    batch_size: int
    num_queries: int
    dequeue_success_percent: int
    body: str | None
    delay_ms: int
    job_descriptors: list[str]
    priority: int | None
    job_state: JobState
    count_future_jobs: bool
    body_regex: str | None
    limit: int | None
    continuation: str
    attempts: int | None
    password: str | None
    tls: Tls | None = None


def parse_options(argv: Sequence[str]) -> Options:
    """Parse and check the arguments; UsageError says what is wrong."""
    args = build_parser().parse_args(list(argv))
    mode = args.mode or args.positional_mode
    if args.mode and args.positional_mode and args.mode != args.positional_mode:
        raise UsageError(f"two modes given: {args.positional_mode!r} and --mode {args.mode!r}")
    options = Options(
        mode=mode or "",
        host=args.host,
        port=args.port,
        server_list=args.server_list,
        timeout=args.timeout,
        queue=args.queue,
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        num_queries=args.num_queries,
        dequeue_success_percent=args.dequeue_success_percent,
        body=args.body,
        delay_ms=args.delay_ms,
        job_descriptors=[d for item in args.job_descriptor for d in item.split(",") if d],
        priority=args.priority,
        job_state=args.job_state,
        count_future_jobs=args.count_future_jobs,
        body_regex=args.body_regex,
        limit=args.limit,
        continuation=args.continuation,
        attempts=args.attempts,
        password=args.password,
        tls=_tls(args),
    )
    validate(options)
    return options


def _tls(args: argparse.Namespace) -> Tls | None:
    if bool(args.tls_certfile) != bool(args.tls_keyfile):
        raise UsageError("a client certificate needs both --tls_certfile and --tls_keyfile")
    if not (args.tls or args.tls_cafile or args.tls_certfile):
        return None
    return Tls(
        cafile=args.tls_cafile or "",
        certfile=args.tls_certfile or "",
        keyfile=args.tls_keyfile or "",
    )


def validate(o: Options) -> None:
    if not o.mode:
        raise UsageError("no mode given: --mode one of " + ", ".join(MODES))
    if o.mode not in MODES:
        raise UsageError(f"unknown mode {o.mode!r}: one of " + ", ".join(MODES))
    problems = [
        (
            o.mode not in ("get_queue_names", "lookup") and not o.queue,
            f"--queue is required for mode {o.mode}",
        ),
        (
            o.mode == "lookup" and not o.job_descriptors,
            "--job_descriptor is required for mode lookup",
        ),
        (not 0 < o.port < 65536, f"--port must be 1-65535, got {o.port}"),
        (o.timeout <= 0, f"--timeout must be positive, got {o.timeout}"),
        (o.concurrency < 1, f"--concurrency must be at least 1, got {o.concurrency}"),
        (o.batch_size < 1, f"--batch_size must be at least 1, got {o.batch_size}"),
        (
            o.num_queries < 1 and o.num_queries != -1,
            f"--num_queries must be at least 1, or -1 for no end; got {o.num_queries}",
        ),
        (
            not 0 <= o.dequeue_success_percent <= 100,
            f"--dequeue_success_percent must be 0-100, got {o.dequeue_success_percent}",
        ),
        (
            o.priority is not None and o.priority < 1,
            f"--priority must be at least 1 (1 is the highest), got {o.priority}",
        ),
        (o.delay_ms < 0, f"--delay_ms must not be negative, got {o.delay_ms}"),
        (o.limit is not None and o.limit < 1, f"--limit must be at least 1, got {o.limit}"),
        (
            o.attempts is not None and o.attempts < 1,
            f"--attempts must be at least 1, got {o.attempts}",
        ),
    ]
    for wrong, message in problems:
        if wrong:
            raise UsageError(message)
