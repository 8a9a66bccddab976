"""`pinledger migrate`: apply the schema's migrations, one line per migration applied;
`--check` says what a run would do and whether it would block the servers' writes
(docs/decisions/0024-online-migrations.md). With a shard map (PINLEDGER_STORE_SHARDS),
every shard in it, one after the other, each under a line naming it; the worst exit
status of them all."""

from __future__ import annotations

import argparse
import sys

from pinledger.projections.dsn import redacted
from pinledger.projections.factory import open_store
from pinledger.projections.migration_plan import Migration, PauseNeededError
from pinledger.projections.store import LedgerStore
from pinledger.service.shards.shard_map import ShardMap

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


def migrate_store(dsn: str, schema: str, check_only: bool, allow_pause: bool) -> int:
    """Migrate (or check) the schema on the store `dsn` names."""
    store = open_store(dsn, schema)
    try:
        return check(store) if check_only else run(store, allow_pause)
    finally:
        store.close()


def run_shards(shards: ShardMap, schema: str, check_only: bool, allow_pause: bool) -> int:
    """Migrate (or check) the schema on every shard of the map."""
    worst = 0
    for shard in shards.shards:
        print(f"shard {shard.name} ({shard.kind}, {redacted(shard.dsn)}):", flush=True)
        worst = max(worst, migrate_store(shard.dsn, schema, check_only, allow_pause))
    return worst
