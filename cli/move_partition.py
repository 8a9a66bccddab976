"""`pinledger move-partition`: move a queue partition's projection to another store
shard by replaying its log, live (decision 0031; service/shards/moves.py says how).

    pinledger move-partition --queue Q --partition P --to SHARD
    pinledger move-partition --from SHARD [--to SHARD]   # drain a shard

Progress is printed every two seconds; an interrupted move is finished by running the
same command again (the target's projection resumes from its own offset; a move already
recorded goes straight to removing the old rows). Exit status: 0 moved (or there
already); 1 not finished (a store or Kafka did not answer: run it again); 2 refused (no
shard map, no such queue, partition or shard, a dequeueOnly target, a ledger format
without moves).
"""

from __future__ import annotations

import argparse
import getpass
import socket
import time

from pinledger.ledger import formats
from pinledger.ledger.events import Actor
from pinledger.ledger.log import Log, LogError, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.catalog_log import catalog_envelopes
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.assembly import open_shards
from pinledger.service.config import Config
from pinledger.service.shards.moves import Mover, MoveRefusedError, MoveReport
from pinledger.service.shards.shard_map import load_shard_map

EXIT_REFUSED = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", help="the queue whose partition moves")
    parser.add_argument("--partition", type=int, help="the partition that moves")
    parser.add_argument(
        "--from",
        dest="source",
        metavar="SHARD",
        help="move every partition off this shard (with --to: all to that shard; else each "
        "to the writable shard holding the fewest)",
    )
    parser.add_argument("--to", dest="target", metavar="SHARD", help="the shard it moves to")
    parser.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds between the switch and removing the old rows (default 10: the servers "
        "read their placements every 2 s)",
    )


def _refusal(config: Config, args: argparse.Namespace) -> str | None:
    """Why the arguments ask for no move, or None."""
    if not config.store_shards:
        return (
            "moving a partition needs a shard map: set PINLEDGER_STORE_SHARDS "
            "(docs/guides/scaling.md#store-shards)"
        )
    single = args.queue is not None or args.partition is not None
    if args.source is not None and single:
        return "--from drains a whole shard: give it without --queue and --partition"
    if args.source is None and not (args.queue and args.partition is not None and args.target):
        return "give --queue Q --partition P --to SHARD, or --from SHARD to drain a shard"
    if args.settle < 0:
        return f"--settle is seconds to wait, not {args.settle}"
    return None


def run(config: Config, args: argparse.Namespace, log: Log) -> int:
    refusal = _refusal(config, args)
    if refusal is not None:
        print(refusal)
        return EXIT_REFUSED
    try:
        return _run(config, args, log)
    except MoveRefusedError as exc:
        print(f"not moved: {exc}")
        return EXIT_REFUSED
    except (StoreError, LogError, TimeoutError) as exc:
        print(f"not finished: {exc}; run the same command again to finish the move")
        return 1


def _run(config: Config, args: argparse.Namespace, log: Log) -> int:
    prefix = config.topic_prefix
    if not log.existing([catalog_topic(prefix)]):
        print(f"no catalog under the prefix {prefix!r}: check PINLEDGER_TOPIC_PREFIX")
        return EXIT_REFUSED
    shard_map = load_shard_map(config.store_shards, config.store_url)
    writer = LedgerWriter(log, prefix)
    envelopes = catalog_envelopes(log, prefix)
    writer.follow_format(formats.folded(formats.PLAIN, (e for v in envelopes for e in v.events)))
    if writer.cluster_format < formats.MOVES:
        print(
            f"moving a partition needs ledger format {formats.MOVES}; the cluster writes "
            f"format {writer.cluster_format}: run `pinledger upgrade-format` first"
        )
        return EXIT_REFUSED
    store = open_shards(shard_map, config.schema, prefix, max_size=2, current=lambda: shard_map)
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    actor = Actor(source=f"pinledger:move-partition by {who}", server=socket.gethostname())
    try:
        mover = Mover(store, log, writer, shard_map, actor, settle_s=args.settle)
        for queue, partition, target in _moves(mover, store, args):
            _said(mover.move(queue, partition, target, lambda: int(time.time() * 1000)))
    finally:
        store.close()
    return 0


def _moves(
    mover: Mover, store: LedgerStore, args: argparse.Namespace
) -> list[tuple[str, int, str]]:
    """(queue, partition, target) of each move asked for."""
    if args.source is None:
        return [(args.queue, args.partition, args.target)]
    if mover.shard_map.get(args.source) is None:
        raise MoveRefusedError(f"no store shard {args.source!r} in the shard map")
    moves = mover.targets_off(args.source, store.queues())
    if args.target:
        moves = [(q, p, args.target) for q, p, _ in moves]
    print(f"{len(moves)} partition(s) to move off {args.source!r}")
    return moves


def _said(report: MoveReport) -> None:
    where = f"{report.queue}[{report.partition}]"
    if report.switched_at is None:
        print(f"{where} is on {report.target!r}; {report.removed:,} old rows removed")
        return
    rate = report.records / max(report.build_s, 1e-9)
    print(
        f"moved {where} from {report.source!r} to {report.target!r}: {report.records:,} "
        f"records replayed in {report.build_s:.1f} s ({rate:,.0f} records/s), switched at "
        f"offset {report.switched_at:,}; {report.removed:,} old rows removed in "
        f"{report.clean_s:.1f} s"
    )
