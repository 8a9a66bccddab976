"""`pinledger cancel QUEUE DESCRIPTOR... [--reason TEXT]`: cancel PENDING or running
jobs by cancelJobs (decision 0036). Each ends FAILED with "cancelled by <source>:
<reason>" in its custom status; the source (default `pinledger-cancel:<user>@<host>`)
is what the job's history names as the canceller. A running job's worker hears it at
its next checkpoint or heartbeat.

Exit status: 0 when every job named is cancelled, 1 when some are not (finished
already, or not found: each is listed), 2 when the call failed or was refused.
"""

from __future__ import annotations

import argparse
import getpass
import socket
import sys

from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.service.config import Config
from pinledger.service.security.tls import peer_context


def default_source() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"pinledger-cancel:{user}@{socket.gethostname()}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", help="the jobs' queue")
    parser.add_argument(
        "descriptors", nargs="+", metavar="DESCRIPTOR", help="a job (queue:s<p>:p<prio>:<id>)"
    )
    parser.add_argument("--reason", default="", help="why, for the jobs' custom status")
    parser.add_argument(
        "--source",
        help="who cancels, as the jobs' history shows it (default: pinledger-cancel:USER@HOST)",
    )
    parser.add_argument(
        "--server", help="host:port of a pinledger server (default: this config's port)"
    )


def run(config: Config, args: argparse.Namespace) -> int:
    server = args.server or f"127.0.0.1:{config.port}"
    try:
        tls = peer_context(config)
        with PinLaterClient(server, source=args.source or default_source(), tls=tls) as client:
            cancelled = client.cancel_jobs(args.queue, args.descriptors, args.reason)
    except ClientError as exc:
        print(f"pinledger cancel: {exc}", file=sys.stderr)
        return 2
    done = set(cancelled)
    for descriptor in args.descriptors:
        if descriptor in done:
            print(f"cancelled      {descriptor}")
        else:
            print(f"not cancelled  {descriptor} (finished already, or no such job)")
    return 0 if done >= set(args.descriptors) else 1
