"""The `pinledger` command's entry (`python -m pinledger` too). `pinledger client` and
`pinledger worker` need only the client library, so they are dispatched before anything
of the server is imported: on a client-only install (`pip install pinledger`) they work,
and every other command says which install it needs (`pinledger[server]`) instead of an
ImportError's traceback."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pinledger.cli.tool import main as client_main
from pinledger.client.worker.runner import main as worker_main

# The server's own dependencies (the `server` extra), by their import names.
SERVER_MODULES = frozenset({"psycopg", "psycopg_pool", "kafka", "confluent_kafka", "pymysql"})


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["client"]:
        # The client tool has PinLater's flags and its own parser.
        return client_main(argv[1:])
    if argv[:1] == ["worker"]:
        return worker_main(argv[1:])
    try:
        # Imported only now: it imports the server, whose drivers a client-only
        # install lacks.
        from pinledger.cli import main as commands  # noqa: PLC0415
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] not in SERVER_MODULES:
            raise
        command = next((a for a in argv if not a.startswith("-")), "")
        print(
            f"pinledger{' ' + command if command else ''}: this install has the client only "
            f"(no module named {missing.name!r}); the server's commands need "
            "`pip install 'pinledger[server]'`. Here: `pinledger client` (PinLater's client "
            "tool) and `pinledger worker MODULE:HANDLER --queue Q`.",
            file=sys.stderr,
        )
        return 2
    return commands.main(argv)
