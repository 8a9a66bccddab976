"""`pinledger shards`: the store's shards (PINLEDGER_STORE_SHARDS, or the one store of
PINLEDGER_STORE_DSN) and the health of each: reachable, and its schema migrated. Exit 1
when one is not, with what to do; the DSNs are shown without their passwords."""

from __future__ import annotations

import argparse

from pinledger.projections.dsn import redacted
from pinledger.projections.factory import open_store
from pinledger.projections.store import StoreError
from pinledger.service.config import Config
from pinledger.service.store_shards import Shard, load_shard_map


def health(shard: Shard, schema: str) -> tuple[bool, str]:
    """Whether the shard serves the schema, and a few words saying so."""
    try:
        store = open_store(shard.dsn, schema, max_size=1)
    except StoreError as exc:
        return False, f"unreachable: {exc}"
    try:
        pending = store.migration_plan().pending
    except StoreError as exc:
        return False, f"unreachable: {exc}"
    finally:
        store.close()
    if pending:
        return False, f"{len(pending)} migration(s) pending: run `pinledger migrate`"
    return True, "healthy"


def run(config: Config, args: argparse.Namespace) -> int:
    shards = load_shard_map(config.store_shards, config.store_url)
    rows = [("shard", "store", "new partitions", "dsn", "health")]
    healthy = True
    for shard in shards.shards:
        ok, said = health(shard, config.schema)
        healthy = healthy and ok
        takes = "no (dequeueOnly)" if shard.dequeue_only else "yes"
        rows.append((shard.name, shard.kind, takes, redacted(shard.dsn), said))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[-1]
        )
    return 0 if healthy else 1
