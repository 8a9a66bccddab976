"""`pinledger replay`: check the live projection against the log.

By default it verifies: each partition's records up to the offset the live projection
has committed are folded in memory and compared, as streams, with the live `jobs` and
`job_events` (projections/verify.py); nothing is written. `--into-schema` rebuilds the
projection into a scratch schema instead and diffs it in SQL (projections/replay.py),
as `--until-offset`/`--until-time` always do: a bounded replay's state is a schema to
look at. `--as-of` and `--explain` read a queue at a past moment (cli/asof.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time
import uuid
from collections.abc import Callable

from pinledger.cli import asof as asof_cli
from pinledger.ledger.descriptor import JOBS_PER_RECORD
from pinledger.ledger.log import Log
from pinledger.projections.dsn import redacted
from pinledger.projections.factory import open_store
from pinledger.projections.projector import Bound, Scope
from pinledger.projections.replay import ReplayReport, replay
from pinledger.projections.store import LedgerStore
from pinledger.projections.verify import MAX_JOBS, verify
from pinledger.service.assembly import open_configured_store, open_log
from pinledger.service.config import Config
from pinledger.service.shards.placement import placements
from pinledger.service.shards.shard_map import ShardMap, load_shard_map


def add_arguments(rep: argparse.ArgumentParser, time_arg: Callable[[str], int]) -> None:
    rep.add_argument("--queue", action="append", help="only this queue (repeatable)")
    rep.add_argument("--partition", type=int, help="only this partition")
    rep.add_argument("--until-offset", type=int, help="stop before this offset per partition")
    rep.add_argument("--until-time", type=time_arg, help="stop after this time (ms or ISO-8601)")
    rep.add_argument(
        "--into-schema",
        nargs="?",
        const="",
        metavar="NAME",
        help="rebuild into a scratch schema and diff it there (default name: a fresh one) "
        "instead of verifying in memory",
    )
    rep.add_argument("--scratch", help="scratch schema name (implies --into-schema)")
    rep.add_argument("--keep", action="store_true", help="keep the scratch schema")
    rep.add_argument(
        "--workers",
        type=int,
        default=0,
        help="verify partitions in this many processes (default 0: one per core; 1: this "
        "process only, to leave the other cores to a server on the same machine)",
    )
    rep.add_argument(
        "--max-jobs",
        type=_max_jobs,
        default=MAX_JOBS,
        help="jobs of one partition held in memory at once while verifying; a partition "
        f"holding more is verified in ranges, one pass each (default {MAX_JOBS:,})",
    )
    asof_cli.add_arguments(rep)


def _max_jobs(text: str) -> int:
    value = int(text)
    if value < JOBS_PER_RECORD:
        # A range of ids is never narrower than one record's jobs.
        raise argparse.ArgumentTypeError(f"--max-jobs must be at least {JOBS_PER_RECORD}")
    return value


def open_ports(config: Config) -> tuple[LedgerStore, Log]:
    """A worker process's own store and log (module level: pickled to the process)."""
    return open_configured_store(config), open_log(config)


def progress_printer() -> Callable[[int, int], None]:
    started = time.monotonic()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < 1.0:
            return
        last[0] = now
        rate = done / max(now - started, 1e-9)
        # `total` counts the log's records, each holding one job event or many.
        print(
            f"  replayed {done:,} events ({rate:,.0f}/s) of a log of ~{total:,} records",
            flush=True,
        )

    return show


def print_report(report: ReplayReport, where: str, scratch: LedgerStore | None = None) -> None:
    rate = report.events / max(report.seconds, 1e-9)
    print(
        f"replayed {report.events:,} events in {report.seconds:.2f}s ({rate:,.0f} events/s) {where}"
    )
    if not report.compared:
        assert scratch is not None  # a bounded replay is always into a scratch schema
        print("bounded replay (--until-offset/--until-time): state at that point:")
        for queue, state, priority, count in scratch.job_counts():
            print(f"  {queue:<24} {state.name:<12} p{priority}  {count:>8,}")
        return
    if report.identical:
        print("identical: the replayed projection equals the live tables")
        return
    print("DIFFERENT: the replayed projection does not match the live tables")
    for diff in report.diffs:
        if diff.only_live or diff.only_replay:
            print(
                f"  {diff.table}: {diff.only_live} rows only live, "
                f"{diff.only_replay} rows only in the replay"
            )
            for row in diff.live_samples:
                print(f"    live:   {row}")
            for row in diff.replay_samples:
                print(f"    replay: {row}")


def _what(scope: Scope, args: argparse.Namespace) -> str:
    return (
        f"{'all queues' if scope.queues is None else ', '.join(args.queue)}"
        f"{'' if args.partition is None else f' partition {args.partition}'}"
    )


def run(config: Config, args: argparse.Namespace) -> int:
    if args.as_of is not None or args.explain or args.json:
        return asof_cli.run(config, args)
    bound = Bound(offset=args.until_offset, at=args.until_time)
    scope = Scope(
        queues=frozenset(args.queue) if args.queue else None, partition=args.partition, bound=bound
    )
    if args.into_schema is None and args.scratch is None and bound == Bound():
        return _verify(config, args, scope)
    return _into_schema(config, args, scope)


def _verify(config: Config, args: argparse.Namespace, scope: Scope) -> int:
    workers = args.workers or os.cpu_count() or 1
    live = open_configured_store(config)
    kafka = open_log(config)
    try:
        print(
            f"verifying {_what(scope, args)} from {config.kafka} against schema "
            f"{config.schema} ({workers} worker{'s' if workers > 1 else ''})",
            flush=True,
        )
        report = verify(
            live,
            kafka,
            config.topic_prefix,
            scope,
            workers=workers,
            open_ports=functools.partial(open_ports, config),
            max_jobs=args.max_jobs,
            progress=progress_printer(),
        )
        print_report(report, "and compared in memory (nothing written)")
        return 0 if report.identical else 1
    finally:
        kafka.close()
        live.close()


def _into_schema(config: Config, args: argparse.Namespace, scope: Scope) -> int:
    scratch_name = args.scratch or args.into_schema or f"replay_{uuid.uuid4().hex[:8]}"
    shard_map = load_shard_map(config.store_shards, config.store_url)
    if len(shard_map.shards) == 1:
        return _into_one(config, args, scope, shard_map.shards[0].dsn, scratch_name, "")
    # Shard by shard (decision 0031): each shard's partitions, and the catalog, into a
    # scratch schema on that shard, compared there with its live tables.
    placed = _placed(config, shard_map)
    worst = 0
    for shard in shard_map.shards:
        only = frozenset(key for key, name in placed.items() if name == shard.name)
        print(f"shard {shard.name} ({shard.kind}, {redacted(shard.dsn)}):", flush=True)
        status = _into_one(
            config,
            args,
            dataclasses.replace(scope, only=only),
            shard.dsn,
            scratch_name,
            f" of shard {shard.name}",
        )
        worst = max(worst, status)
    return worst


def _placed(config: Config, shard_map: ShardMap) -> dict[tuple[str, int], str]:
    """The shard of every partition of every queue, by the home shard's catalog."""
    home = shard_map.shards[0]
    store = open_store(home.dsn, config.schema)
    try:
        return placements(store.queues(), home.name)
    finally:
        store.close()


def _into_one(
    config: Config,
    args: argparse.Namespace,
    scope: Scope,
    dsn: str,
    scratch_name: str,
    where: str,
) -> int:
    live = open_store(dsn, config.schema)
    scratch = open_store(dsn, scratch_name)
    kafka = open_log(config)
    try:
        print(
            f"replaying {_what(scope, args)}{where} from {config.kafka} into schema {scratch_name}",
            flush=True,
        )
        report = replay(live, scratch, kafka, config.topic_prefix, scope, progress_printer())
        print_report(report, f"into schema {scratch_name}{where}", scratch)
        return 0 if report.identical else 1
    finally:
        kafka.close()
        live.close()
        if args.keep:
            scratch.close()
            print(f"kept schema {scratch_name}{where}")
        else:
            scratch.drop()
