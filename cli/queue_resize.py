"""`pinledger queue resize Q N`: the queue takes new jobs on N partitions from now on,
live (issue 24; decision 0030). Growing it, Kafka's partitions are added first; then a
`QueueResized` record in the catalog says the queue takes jobs on partitions 0..N-1:
the servers' catalog projection picks it up within a second, their owners' group is
assigned any new partitions, and new enqueues spread over them. Shrinking it, the
partitions past N take no new jobs and are dequeued until empty (Kafka never removes a
partition; growing the queue again uses them again). Descriptors already given out
keep their meaning: a partition is never renumbered or removed.

Exit status: 0 resized, or already that size; 2 refused (no such queue, fewer than one
partition, a cluster whose ledger format has no resizes yet).
"""

from __future__ import annotations

import argparse
import getpass
import socket
import time

from pinledger.ledger import formats
from pinledger.ledger.events import Actor
from pinledger.ledger.log import Log, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.catalog_log import catalog_envelopes, catalog_queues
from pinledger.service.config import Config
from pinledger.service.shards.placement import Placer
from pinledger.service.shards.shard_map import load_shard_map

EXIT_REFUSED = 2


def add_arguments(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The `queue` command's actions; returns them, for the others' (cli/queue_pause.py)."""
    actions = parser.add_subparsers(dest="queue_command", required=True)
    resize = actions.add_parser(
        "resize",
        help="how many partitions take a queue's new jobs, live: more are added, fewer "
        "drain the rest",
    )
    resize.add_argument("queue", help="the queue's name")
    resize.add_argument("partitions", type=int, help="how many partitions take its new jobs")
    return actions


def run(config: Config, args: argparse.Namespace, log: Log) -> int:
    prefix = config.topic_prefix
    name, wanted = str(args.queue), int(args.partitions)
    if not log.existing([catalog_topic(prefix)]):
        print(f"no catalog under the prefix {prefix!r}: check PINLEDGER_TOPIC_PREFIX")
        return EXIT_REFUSED
    envelopes = catalog_envelopes(log, prefix)
    queue = catalog_queues(envelopes).get(name)
    if queue is None:
        print(f"no queue {name!r} in the catalog (prefix {prefix!r})")
        return EXIT_REFUSED
    if wanted < 1:
        print(f"not resized: a queue needs at least one partition, not {wanted}")
        return EXIT_REFUSED
    if wanted == queue.open:
        print(f"queue {name!r} takes jobs on {wanted} partitions already: nothing to do")
        return 0
    writer = LedgerWriter(log, prefix)
    # The catalog's records are plain ones every release reads (formats.py).
    writer.follow_format(formats.folded(formats.PLAIN, (e for v in envelopes for e in v.events)))
    # Partitions it adds are placed on the shard map's shards (decision 0031), counted
    # from the catalog as read from the log just now.
    shard_map = load_shard_map(config.store_shards, config.store_url)
    writer.placer = Placer(lambda: shard_map, lambda: list(catalog_queues(envelopes).values()))
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    actor = Actor(source="pinledger:queue-resize", server=socket.gethostname())
    writer.resize_queue(
        name, wanted, int(time.time() * 1000), actor, f"pinledger queue resize, by {who}"
    )
    if wanted > queue.open:
        print(
            f"resized queue {name!r} from {queue.open} to {wanted} partitions; the servers "
            "take the new ones within seconds"
        )
    else:
        print(
            f"resized queue {name!r} from {queue.open} to {wanted} partitions; partitions "
            f"{wanted}..{queue.open - 1} take no new jobs and drain (their jobs are dequeued "
            "as before)"
        )
    return 0
