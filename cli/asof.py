"""`pinledger replay --as-of <time|offset> --queue Q [--explain A B] [--json]`: a queue's
state at a past moment, rebuilt from the log by a bounded replay into a scratch schema."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

from pinledger.ledger import descriptor
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.times import format_ms
from pinledger.projections.actions import Tag
from pinledger.projections.asof import (
    AsOf,
    QueueAsOf,
    jobs_then,
    parse_as_of,
    queue_as_of,
    why_first,
)
from pinledger.projections.factory import open_store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.projections.store import LedgerStore
from pinledger.service.assembly import open_log
from pinledger.service.config import Config
from pinledger.service.shards.shard_map import home_dsn


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as-of",
        metavar="TIME|OFFSET",
        help="show one queue (--queue) as it was then: an offset (offset:N, or a number "
        "below 10**11; in each partition replayed) or a time (ms since the epoch, or "
        "ISO-8601, UTC unless it says)",
    )
    parser.add_argument(
        "--explain",
        nargs=2,
        metavar=("A", "B"),
        help="with --as-of: why job A is dequeued before job B at that moment (or not)",
    )
    parser.add_argument(
        "--limit", type=int, default=20, help="with --as-of: due jobs to list (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="with --as-of: print JSON")


def _progress() -> Any:
    last = [time.monotonic()]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            # `total` counts the log's records, each holding one job event or many.
            print(
                f"  replayed {done:,} events of a log of ~{total:,} records",
                file=sys.stderr,
                flush=True,
            )

    return show


def _first_claim_after(live: LedgerStore, d: JobDescriptor, as_of: AsOf, now: int) -> Any:
    """The job's first applied claim after the moment, from the live timeline."""
    for row in live.job_events(d.queue, d.partition, d.local_id):
        later = row.offset > as_of.value if as_of.kind == "offset" else row.at > now
        if later and row.type == Tag.CLAIMED and row.applied:
            return {"at": row.at, "offset": row.offset, "claim": row.claim}
    return None


def _explain(
    live: LedgerStore, scratch: LedgerStore, queue: str, texts: list[str], as_of: AsOf, now: int
) -> dict[str, Any]:
    ds = [descriptor.parse(text) for text in texts]
    try:
        jobs = jobs_then(scratch, queue, ds)
    except ValueError as exc:
        raise ValueError(f"--explain {exc}") from None
    first, reason = why_first((ds[0], jobs[0]), (ds[1], jobs[1]), now)
    return {
        "first": None if first is None else str(first),
        "reason": reason,
        "jobs": [
            {
                "descriptor": str(d),
                "state": None if job is None else job.state.name,
                "priority": None if job is None else job.priority,
                "run_after": None if job is None else job.run_after,
                "next_claim": _first_claim_after(live, d, as_of, now),
            }
            for d, job in zip(ds, jobs, strict=True)
        ],
    }


def _to_json(as_of: AsOf, state: QueueAsOf, explained: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "queue": state.queue,
        "as_of": {"kind": as_of.kind, "value": as_of.value},
        "now": state.now,
        "counts": [
            {"state": r.state.name, "priority": r.priority, "due": r.due, "future": r.future}
            for r in state.counts
        ],
        "due": [
            {"descriptor": j.descriptor, "priority": j.priority, "run_after": j.run_after}
            for j in state.due
        ],
        "explain": explained,
    }


def _print(as_of: AsOf, state: QueueAsOf, explained: dict[str, Any] | None) -> None:
    print(f"queue {state.queue} as of {as_of} (clock {format_ms(state.now)} UTC)")
    print("  state        priority       due    future")
    for r in state.counts:
        print(f"  {r.state.name:<12} p{r.priority:<8} {r.due:>9,} {r.future:>9,}")
    if not state.counts:
        print("  (no jobs)")
    print(f"pending and due, in dequeue order (first {len(state.due)}):")
    for n, j in enumerate(state.due, start=1):
        print(f"  {n:>4}. {j.descriptor}  p{j.priority}  due since {format_ms(j.run_after)}")
    if explained is not None:
        print(f"why: {explained['reason']}")
        for job in explained["jobs"]:
            claim = job["next_claim"]
            then = (
                "not claimed after that moment"
                if claim is None
                else f"next claimed at {format_ms(claim['at'])} (offset {claim['offset']})"
            )
            print(f"  {job['descriptor']}: {then}")


def run(config: Config, args: argparse.Namespace) -> int:
    if args.as_of is None:
        raise ValueError("--explain and --json go with --as-of")
    as_of = parse_as_of(args.as_of)
    if not args.queue or len(args.queue) != 1:
        raise ValueError("--as-of shows one queue: give exactly one --queue")
    if args.limit < 0:
        raise ValueError("--limit must be 0 or more")
    (queue,) = args.queue
    scope = Scope(queues=frozenset({queue}), partition=args.partition, bound=as_of.bound())
    scratch_name = args.scratch or f"asof_{uuid.uuid4().hex[:8]}"
    # A replay bounded by a moment compares nothing with the live tables: both on the
    # home shard (the one store without a map).
    home = home_dsn(config.store_shards, config.store_url)
    live = open_store(home, config.schema)
    scratch = open_store(home, scratch_name)
    kafka = open_log(config)
    try:
        print(f"replaying queue {queue} up to {as_of} into schema {scratch_name}", file=sys.stderr)
        replay(live, scratch, kafka, config.topic_prefix, scope, _progress())
        if queue not in {q.name for q in scratch.queues()}:
            print(f"pinledger replay: queue {queue!r} did not exist as of {as_of}", file=sys.stderr)
            return 1
        now = as_of.value if as_of.kind == "time" else (scratch.last_event_time(queue) or 0)
        state = queue_as_of(scratch, queue, now, args.limit)
        explained = (
            None
            if args.explain is None
            else _explain(live, scratch, queue, list(args.explain), as_of, now)
        )
        if args.json:
            print(json.dumps(_to_json(as_of, state, explained), indent=2))
        else:
            _print(as_of, state, explained)
        return 0
    finally:
        kafka.close()
        live.close()
        if args.keep:
            scratch.close()
            print(f"kept schema {scratch_name}", file=sys.stderr)
        else:
            scratch.drop()
