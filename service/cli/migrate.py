"""`pinledger migrate`: apply the schema's migrations, one line per migration applied;
`--check` says what a run would do and whether it would block the servers' writes
(docs/decisions/0024-online-migrations.md)."""

from __future__ import annotations

import argparse
import sys

from pinledger.projections.migration_plan import Migration, PauseNeededError
from pinledger.projections.store import LedgerStore

# A pending migration needs the servers stopped (`--check`, or a run that reached it
# without --allow-pause). Apart from 2, an error.
EXIT_NEEDS_PAUSE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="print each pending migration and how it runs, change nothing; exit "
        f"{EXIT_NEEDS_PAUSE} when one needs the servers stopped",
    )
    parser.add_argument(
        "--allow-pause",
        action="store_true",
        help="also run the migrations that block writes (stop every server first)",
    )


def check(store: LedgerStore) -> int:
    plan = store.migration_plan()
    where = f"schema {store.schema} ({store.kind})"
    if not plan.pending:
        print(f"{where}: up to date")
        return 0
    print(f"{where}: {len(plan.pending)} pending")
    for migration in plan.pending:
        print(f"  {migration.name}: {migration.how()}")
    if plan.new_schema:
        print("a new schema: nothing serves it yet, so every migration runs now, pauses included")
        return 0
    blocking = plan.needs_pause()
    if not blocking:
        print("none blocks writes: run `pinledger migrate` while the servers serve")
        return 0
    names = ", ".join(m.name for m in blocking)
    print(
        f"{names} would block writes: stop every server of this schema, then run "
        "`pinledger migrate --allow-pause`"
    )
    return EXIT_NEEDS_PAUSE


def _applied(migration: Migration, seconds: float) -> None:
    print(f"applied {migration.name} ({migration.mode.value}) in {seconds:.2f} s", flush=True)


def run(store: LedgerStore, allow_pause: bool) -> int:
    try:
        applied = store.migrate(allow_pause=allow_pause, progress=_applied)
    except PauseNeededError as exc:
        print(f"pinledger migrate: {exc}", file=sys.stderr)
        return EXIT_NEEDS_PAUSE
    print(f"schema {store.schema}: " + (f"{len(applied)} applied" if applied else "up to date"))
    return 0
