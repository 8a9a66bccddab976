"""`pinledger queue resize Q N`: give a queue N partitions, live (issue 24, part 1;
decision 0030). Kafka's partitions are added first, then a `QueueResized` record in the
catalog says the queue takes jobs on all of them: the servers' catalog projection picks
it up within a second, their owners' group is assigned the new partitions, and new
enqueues spread over them. Descriptors already given out keep their meaning: a
partition is never renumbered or removed.

Exit status: 0 resized, or already that size; 2 refused (no such queue, fewer
partitions than it has, a cluster whose ledger format has no resizes yet).
"""

from __future__ import annotations

import argparse
import getpass
import socket
import time

from pinledger.ledger import codec
from pinledger.ledger.events import Actor
from pinledger.ledger.log import Log, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.store import QueueRow
from pinledger.projections.verify import read_partition
from pinledger.service.config import Config
from pinledger.service.ownership.ledger_format import read_cluster_format

EXIT_REFUSED = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="queue_command", required=True)
    resize = actions.add_parser(
        "resize",
        help="give a queue more partitions, live: new enqueues spread over them within "
        "seconds (a queue cannot shrink yet)",
    )
    resize.add_argument("queue", help="the queue's name")
    resize.add_argument("partitions", type=int, help="how many partitions it should have")


def catalog_queues(log: Log, prefix: str) -> dict[str, QueueRow]:
    """The queues the catalog describes now, read from the log."""
    topic = catalog_topic(prefix)
    queues: dict[str, QueueRow] = {}
    for record in read_partition(log, topic, 0, 0, log.end_offset(topic, 0)):
        envelope = codec.decode(record.value)
        for event in envelope.events:
            fold_queue_event(queues, event, envelope.at)
    return queues


def run(config: Config, args: argparse.Namespace, log: Log) -> int:
    prefix = config.topic_prefix
    name, wanted = str(args.queue), int(args.partitions)
    if not log.existing([catalog_topic(prefix)]):
        print(f"no catalog under the prefix {prefix!r}: check PINLEDGER_TOPIC_PREFIX")
        return EXIT_REFUSED
    queue = catalog_queues(log, prefix).get(name)
    if queue is None:
        print(f"no queue {name!r} in the catalog (prefix {prefix!r})")
        return EXIT_REFUSED
    if wanted < queue.partitions:
        print(
            f"not resized: queue {name!r} has {queue.partitions} partitions, and a queue "
            f"cannot shrink yet; drain partitions with drainPartitions in the queue config"
        )
        return EXIT_REFUSED
    if wanted == queue.partitions:
        print(f"queue {name!r} has {wanted} partitions already: nothing to do")
        return 0
    writer = LedgerWriter(log, prefix)
    writer.follow_format(read_cluster_format(log, prefix)[0])
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    actor = Actor(source="pinledger:queue-resize", server=socket.gethostname())
    writer.resize_queue(
        name, wanted, int(time.time() * 1000), actor, f"pinledger queue resize, by {who}"
    )
    print(
        f"resized queue {name!r} from {queue.partitions} to {wanted} partitions; the "
        "servers take the new ones within seconds"
    )
    return 0
