"""`pinledger schedules [--queue Q] [--json]`: the periodic jobs the queue config lists
(decision 0038), each with its last tick (and the job it enqueued) and its next, from
the queue config file the servers read (PINLEDGER_QUEUE_CONFIG) and the ticks the
catalog recorded (the store).

Exit status: 0; 1 when a schedule's queue does not exist (its ticks never run); 2 when
the queue config or the store could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pinledger.ledger.times import format_ms
from pinledger.service.assembly import open_configured_store
from pinledger.service.config import Config
from pinledger.service.queue_config import QueueConfig, QueueConfigError, parse_queue_config
from pinledger.service.schedules.listing import ScheduleLine, schedule_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", help="only this queue's schedules")
    parser.add_argument("--json", action="store_true", help="print JSON, one object per line")


def run(config: Config, args: argparse.Namespace) -> int:
    try:
        queue_config = _queue_config(config)
    except (OSError, QueueConfigError) as exc:
        print(f"pinledger schedules: cannot read the queue config: {exc}", file=sys.stderr)
        return 2
    store = open_configured_store(config, max_size=1)
    try:
        ticks = store.schedule_ticks(args.queue)
        queues = [row.name for row in store.queues()]
    finally:
        store.close()
    lines = schedule_lines(queue_config, ticks, queues, int(time.time() * 1000))
    if args.queue:
        lines = [line for line in lines if line.queue == args.queue]
    for line in lines:
        print(json.dumps(_json(line)) if args.json else _text(line))
    if not lines and not args.json:
        where = f"queue {args.queue!r}" if args.queue else "any queue"
        print(f"no schedules for {where} (`schedules` in {config.queue_config or 'no file'})")
    return 1 if any(not line.queue_exists and line.when for line in lines) else 0


def _queue_config(config: Config) -> QueueConfig:
    if not config.queue_config:
        return QueueConfig()
    return parse_queue_config(Path(config.queue_config).read_bytes())


def _text(line: ScheduleLine) -> str:
    last = (
        "never" if line.last_ms is None else f"{format_ms(line.last_ms, zulu=True)} {line.last_job}"
    )
    if not line.when:
        return f"{line.queue}/{line.name}: not in the queue config; last tick {last}"
    if not line.queue_exists:
        return f"{line.queue}/{line.name}: {line.when}; the queue does not exist: create it"
    assert line.next_ms is not None
    following = format_ms(line.next_ms, zulu=True)
    return f"{line.queue}/{line.name}: {line.when}; last tick {last}; next {following}"


def _json(line: ScheduleLine) -> dict[str, object]:
    return {
        "queue": line.queue,
        "schedule": line.name,
        "when": line.when or None,
        "last_tick_ms": line.last_ms,
        "last_job": line.last_job or None,
        "next_tick_ms": line.next_ms,
        "queue_exists": line.queue_exists,
    }
