"""`pinledger queue pause Q [--reason ...]` and `pinledger queue resume Q` (issue 42;
decision 0035): a `QueuePaused` record in the catalog. Every server stops handing out
the queue's jobs (dequeueJobs answers none) once it has read the record, within about a
second; enqueues go on. Resuming hands them out again. The dashboard's Pause and Resume
buttons append the same record (`pause_queue`).

Exit status: 0 paused or resumed, or already so; 2 refused (no such queue, a reason too
long, a cluster whose ledger format has no pauses yet).
"""

from __future__ import annotations

import argparse
import getpass
import socket
import time
from collections.abc import Callable

from pinledger.cli.catalog_preflight import preflight
from pinledger.ledger import formats
from pinledger.ledger.events import Actor, QueuePaused
from pinledger.ledger.log import Log
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.skips import REASON_CHARS
from pinledger.service.config import Config

EXIT_REFUSED = 2


class PauseRefusedError(ValueError):
    """A pause or resume that cannot be made; the message says why and what to do."""


def add_arguments(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pause = actions.add_parser(
        "pause",
        help="stop handing out a queue's jobs on every server (enqueues go on)",
    )
    pause.add_argument("queue", help="the queue's name")
    pause.add_argument(
        "--reason", default="", help=f"why, kept in the catalog (at most {REASON_CHARS} chars)"
    )
    resume = actions.add_parser("resume", help="hand out a paused queue's jobs again")
    resume.add_argument("queue", help="the queue's name")
    resume.add_argument("--reason", default="", help="why, kept in the catalog")


def run(config: Config, args: argparse.Namespace, log: Log) -> int:
    paused = args.queue_command == "pause"
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    actor = Actor(source=f"pinledger:queue-{args.queue_command} by {who}", server=who)
    wanted = QueuePaused(str(args.queue), paused, str(args.reason))
    try:
        said = pause_queue(log, config.topic_prefix, wanted, actor, lambda: int(time.time() * 1000))
    except PauseRefusedError as exc:
        print(f"not {'paused' if paused else 'resumed'}: {exc}")
        return EXIT_REFUSED
    print(said)
    return 0


def pause_queue(
    log: Log, prefix: str, wanted: QueuePaused, actor: Actor, now_ms: Callable[[], int]
) -> str:
    """Check the pause or resume against the catalog as the log has it, append it;
    returns what was done. Raises PauseRefusedError for one that cannot be made."""
    name = wanted.name
    cluster, row = preflight(
        log,
        prefix,
        name,
        wanted.reason,
        formats.PAUSES,
        "pausing or resuming a queue",
        PauseRefusedError,
    )
    if row.paused == wanted.paused:
        return (
            f"queue {name!r} is {'paused' if row.paused else 'not paused'} already: nothing to do"
        )
    writer = LedgerWriter(log, prefix)
    writer.follow_format(cluster)
    writer.pause_queue(wanted, now_ms(), actor)
    if wanted.paused:
        return (
            f"paused queue {name!r}: every server hands out none of its jobs once it has "
            "read the catalog (within seconds); enqueues go on"
        )
    return f"resumed queue {name!r}: the servers hand out its jobs again within seconds"
