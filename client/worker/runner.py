"""`pinledger worker MODULE:HANDLER --queue Q`: the Worker as a command, so that a
worker is a function and a line in a deployment rather than a script around one.

    pinledger worker myapp.jobs:send_email --queue emails --servers pl-1:9010,pl-2:9010 \\
        --concurrency 8 --status-port 9102

The handler is imported as `module:attribute` (dots after the colon reach into an
object: `myapp.jobs:Mailer.send`), from the working directory first, as `python -m`
does. It runs under the Worker (client/worker/loop.py): retries by the policy, claims
renewed, and on SIGTERM or SIGINT the dequeuing stops, running jobs get `--grace-s` to
finish and the rest are handed back; a second signal hands them back at once. An
orchestrator's grace period must cover `--grace-s` plus the last acks' flush (a few
seconds): Kubernetes' `terminationGracePeriodSeconds` (30 s by default) for the default
`--grace-s 20`, systemd's `TimeoutStopSec`.

`--status-port` serves /health and /metrics (client/worker/status.py); 0 picks a free
port, and no flag serves none. `--processes N` runs N worker processes under this one
(client/worker/processes.py), for handlers that hold the interpreter lock; its status
port answers for all of them. The command needs the client library only, never the
server's settings: it reads no PINLEDGER_* variable but those its options name.

Exit status: 0 after a stop; 2 for an option, a server list or a handler that cannot
be used (the message says which).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.client.retry import exponential
from pinledger.client.tls import Tls
from pinledger.client.worker.handler import Handler
from pinledger.client.worker.loop import Worker
from pinledger.client.worker.options import worker_source
from pinledger.client.worker.processes import Supervisor
from pinledger.client.worker.status import Routes, StatusServer, worker_routes

log = logging.getLogger("pinledger.worker")


class HandlerSpecError(ValueError):
    """MODULE:HANDLER names nothing callable; the message says what was wrong."""


def load_handler(spec: str) -> Handler:
    """The callable `module:attribute[.attribute...]` names."""
    module_name, colon, path = spec.partition(":")
    if not colon or not module_name or not path:
        raise HandlerSpecError(
            f"{spec!r} is not MODULE:HANDLER (for example myapp.jobs:send_email)"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` finds the application's modules
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandlerSpecError(f"cannot import {module_name!r}: {exc}") from exc
    for attribute in path.split("."):
        try:
            target = getattr(target, attribute)
        except AttributeError:
            raise HandlerSpecError(
                f"{module_name!r} has no {path!r} ({attribute!r} is missing)"
            ) from None
    if not callable(target):
        raise HandlerSpecError(f"{spec} is a {type(target).__name__}, not a function")
    handler: Handler = target
    return handler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinledger worker",
        description="run a handler for every job of a queue (the Worker as a command)",
    )
    parser.add_argument("handler", metavar="MODULE:HANDLER", help="e.g. myapp.jobs:send_email")
    parser.add_argument("--queue", required=True, help="the queue to work on")
    parser.add_argument(
        "--servers",
        default="127.0.0.1:9010",
        help="host:port[,host:port...], or a file listing them (default 127.0.0.1:9010)",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="handler threads (4)")
    parser.add_argument(
        "--batch-size", type=int, help="jobs per dequeue (default: the concurrency)"
    )
    parser.add_argument(
        "--grace-s",
        type=float,
        default=20.0,
        help="on SIGTERM, how long running jobs may finish before they are handed back (20)",
    )
    parser.add_argument(
        "--claim-timeout-s",
        type=float,
        default=600.0,
        help="the servers' PINLEDGER_CLAIM_TIMEOUT_S; claims are renewed every third of it",
    )
    parser.add_argument(
        "--retry-s",
        type=float,
        default=1.0,
        help="a failed job's first retry delay, doubling up to 300 s, 20%% jitter (1)",
    )
    parser.add_argument(
        "--name", help="the worker's name in its source and logs (default: the handler's)"
    )
    parser.add_argument(
        "--status-host", default="127.0.0.1", help="address of /health and /metrics"
    )
    parser.add_argument(
        "--status-port", type=int, help="serve /health and /metrics here (0: a free port)"
    )
    parser.add_argument("--tls-cafile", help="TLS to the servers: the CA (PEM) to trust")
    parser.add_argument("--tls-certfile", help="a client certificate (PEM), with its key")
    parser.add_argument("--tls-keyfile", help="the client certificate's key (PEM)")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes, for CPU-bound handlers: each runs --concurrency threads "
        "(default 1: this process)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    # Set by the --processes supervisor for each child (client/worker/processes.py).
    parser.add_argument("--port-file", help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    return parser


def child_arguments(args: argparse.Namespace) -> list[str]:
    """The options a --processes supervisor starts each child with: its own, but for
    the processes and the status port, which are the supervisor's."""
    given = [
        ("--queue", args.queue),
        ("--servers", args.servers),
        ("--concurrency", args.concurrency),
        ("--batch-size", args.batch_size),
        ("--grace-s", args.grace_s),
        ("--claim-timeout-s", args.claim_timeout_s),
        ("--retry-s", args.retry_s),
        ("--name", args.name),
        ("--tls-cafile", args.tls_cafile),
        ("--tls-certfile", args.tls_certfile),
        ("--tls-keyfile", args.tls_keyfile),
    ]
    arguments = [args.handler]
    for option, value in given:
        if value is not None:
            arguments += [option, str(value)]
    return [*arguments, *(["--verbose"] if args.verbose else [])]


def _follow_parent(parent: int, worker: Worker) -> None:
    """A child of --processes stops when its supervisor is gone (killed, say)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        log.warning("%s: the worker supervisor (pid %d) is gone: stopping", worker.name, parent)
        worker.stop()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class StatusPortError(Exception):
    """The status port cannot be served; the message says where and why."""


@contextmanager
def _status(routes: Routes, args: argparse.Namespace, what: str) -> Iterator[None]:
    """/health and /metrics on --status-port while the block runs (none without it)."""
    if args.status_port is None:
        yield
        return
    where = f"{args.status_host}:{args.status_port}"
    try:
        status = StatusServer(routes, args.status_host, args.status_port)
    except OSError as exc:
        raise StatusPortError(f"cannot serve /health on {where}: {exc}") from exc
    status.start()
    if args.port_file:  # a --processes supervisor reads it
        Path(args.port_file).write_text(str(status.port))
    log.info("%s: /health and /metrics on http://%s:%d", what, args.status_host, status.port)
    try:
        yield
    finally:
        status.stop()


def _serve_processes(args: argparse.Namespace) -> int:
    supervisor = Supervisor(child_arguments(args), args.processes, args.grace_s)
    with _status(supervisor.routes(), args, f"{args.processes} worker processes"):
        return supervisor.run()


def _tls(args: argparse.Namespace) -> Tls | None:
    if not (args.tls_cafile or args.tls_certfile or args.tls_keyfile):
        return None
    return Tls(
        cafile=args.tls_cafile or "",
        certfile=args.tls_certfile or "",
        keyfile=args.tls_keyfile or "",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.processes < 1:
        print(
            f"pinledger worker: --processes must be at least 1, not {args.processes}",
            file=sys.stderr,
        )
        return 2
    try:
        handler = load_handler(args.handler)
    except HandlerSpecError as exc:
        print(f"pinledger worker: {exc}", file=sys.stderr)
        return 2
    name = args.name or args.handler.partition(":")[2]
    servers: str | list[str] = (
        args.servers
        if os.path.isfile(args.servers)
        else [s.strip() for s in args.servers.split(",") if s.strip()]
    )
    try:
        client = PinLaterClient(servers, source=worker_source(name), tls=_tls(args))
    except (ClientError, OSError, ValueError) as exc:
        print(f"pinledger worker: {exc}", file=sys.stderr)
        return 2
    with client:
        try:
            worker = Worker(
                client,
                args.queue,
                handler,
                concurrency=args.concurrency,
                batch_size=args.batch_size or args.concurrency,
                retry=exponential(args.retry_s, cap_s=300, jitter=0.2),
                claim_timeout_s=args.claim_timeout_s,
                grace_s=args.grace_s,
                name=f"{name}[{args.queue}]",
            )
        except ValueError as exc:
            print(f"pinledger worker: {exc}", file=sys.stderr)
            return 2
        try:
            if args.processes > 1:
                # The options were checked here, once, rather than by each child in a
                # loop of restarts; this process runs no handler.
                return _serve_processes(args)
            with _status(worker_routes(worker), args, worker.name):
                if args.parent is not None:
                    _follow_parent(args.parent, worker)
                worker.run()  # on the main thread: SIGTERM and SIGINT stop it gracefully
        except StatusPortError as exc:
            print(f"pinledger worker: {exc}", file=sys.stderr)
            return 2
    return 0
