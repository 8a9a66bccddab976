"""`pinledger shards`: the store's shards (PINLEDGER_STORE_SHARDS, or the one store of
PINLEDGER_STORE_DSN), how many queue partitions are placed on each (the home shard's
catalog projection: a partition never placed is on the home shard, the first), and the
health of each: reachable, and its schema migrated. Exit 1
when one is not, with what to do; the DSNs are shown without their passwords."""

from __future__ import annotations

import argparse

from pinledger.projections.dsn import redacted
from pinledger.projections.factory import open_store
from pinledger.projections.store import StoreError
from pinledger.service.config import Config
from pinledger.service.shards.placement import placements
from pinledger.service.shards.shard_map import Shard, ShardMap, load_shard_map


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


def placed(shards: ShardMap, schema: str) -> dict[str, int] | None:
    """Partitions per shard, by the home shard's catalog projection; None when it cannot
    be read (its health says why)."""
    home = shards.shards[0]
    counts = dict.fromkeys((s.name for s in shards.shards), 0)
    try:
        store = open_store(home.dsn, schema, max_size=1)
        try:
            queues = store.queues()
        finally:
            store.close()
    except StoreError:
        return None
    for shard in placements(queues, home.name).values():
        counts[shard] = counts.get(shard, 0) + 1
    return counts


def run(config: Config, args: argparse.Namespace) -> int:
    shards = load_shard_map(config.store_shards, config.store_url)
    rows = [("shard", "store", "new partitions", "partitions", "dsn", "health")]
    healthy = True
    health_of = {shard.name: health(shard, config.schema) for shard in shards.shards}
    counts = placed(shards, config.schema) if health_of[shards.shards[0].name][0] else None
    for shard in shards.shards:
        ok, said = health_of[shard.name]
        healthy = healthy and ok
        takes = "no (dequeueOnly)" if shard.dequeue_only else "yes"
        held = "?" if counts is None else str(counts.get(shard.name, 0))
        rows.append((shard.name, shard.kind, takes, held, redacted(shard.dsn), said))
    # A placement naming a shard the map no longer lists: its partitions are unserved.
    for name, held_count in sorted((counts or {}).items()):
        if shards.get(name) is None and held_count:
            healthy = False
            missing = "not in the shard map: add it back, or move its partitions"
            rows.append((name, "?", "no", str(held_count), "-", missing))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[-1]
        )
    return 0 if healthy else 1
