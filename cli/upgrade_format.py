"""`pinledger upgrade-format`: raise the ledger format the cluster writes (decision
0025), the last step of a rolling upgrade, once every server runs a release that reads
the new format. It reads the cluster's format from the catalog and the formats each
live server advertises in the owners' group; it raises the format only when every live
server reads the new one, by appending a `FormatRaised` record to the catalog. Servers
follow it within a members tick (2 s).

Exit status: 0 raised, or already there (with --check: could be raised, or already
there); 2 refused (a live server would not read the new format, or this release does
not know it); 1 the cluster has no catalog under this prefix.
"""

from __future__ import annotations

import argparse
import socket
import time

from pinledger.ledger import formats
from pinledger.ledger.events import Actor
from pinledger.ledger.log import GroupMember, Log, catalog_topic, owners_group
from pinledger.ledger.writer import LedgerWriter
from pinledger.service.config import Config
from pinledger.service.ownership.maintenance.ledger_format import read_cluster_format

EXIT_REFUSED = 2
EXIT_NO_CLUSTER = 1
# How long to wait for the owners' group to finish a rebalance before judging it.
SETTLE_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to",
        type=int,
        default=formats.LATEST,
        help=f"the format to raise to (default: this release's newest, {formats.LATEST})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="say what would be done and whether it may be, and change nothing",
    )


def run(config: Config, args: argparse.Namespace, log: Log) -> int:
    prefix = config.topic_prefix
    catalog = catalog_topic(prefix)
    if not log.existing([catalog]):
        print(
            f"no catalog topic {catalog}: no cluster under the prefix {prefix!r} (a server "
            f"creates it at its first start, at format {formats.LATEST}); check "
            "PINLEDGER_KAFKA and PINLEDGER_TOPIC_PREFIX"
        )
        return EXIT_NO_CLUSTER
    current, _ = read_cluster_format(log, prefix)
    members = {m.member_id: m.advertised for m in _settled_members(log, prefix)}
    print(f"the cluster writes ledger format {current}; this release reads {_listed()}")
    for member, advertised in sorted(members.items()):
        print(f"  {member}: reads {_listed(formats.advertised_reads(advertised))}")
    if not members:
        print("  (no live server)")
    target = args.to
    if target <= current:
        print(f"already at format {current}: nothing to do")
        return 0
    if formats.unreadable(target) is not None:
        print(
            f"not raised: format {target} is unknown to this release (it reads "
            f"{_listed()}); run the upgrade-format of a release that reads it"
        )
        return EXIT_REFUSED
    blockers = formats.blockers(members, target)
    if blockers:
        print(f"not raised to format {target}: these live servers would not read it:")
        for line in blockers:
            print(f"  {line}")
        print("upgrade them first (docs/guides/upgrading.md), then run upgrade-format again")
        return EXIT_REFUSED
    if args.check:
        print(f"would raise the ledger format from {current} to {target}")
        return 0
    actor = Actor(source="pinledger:upgrade-format", server=socket.gethostname())
    LedgerWriter(log, prefix).raise_format(target, int(time.time() * 1000), actor)
    print(
        f"raised the ledger format from {current} to {target}; the servers follow it "
        "within a few seconds"
    )
    return 0


def _settled_members(log: Log, prefix: str) -> list[GroupMember]:
    """The owners' group's members once it is not rebalancing. While it is, Kafka lists
    the members without their metadata (and so without advertisements) or assignments:
    a member showing neither is taken for a rebalance under way and asked again, up to
    SETTLE_S; past that it counts as advertising nothing."""
    deadline = time.monotonic() + SETTLE_S
    said = False
    while True:
        members = log.group_members(owners_group(prefix))
        if not any(not m.partitions and not m.advertised for m in members):
            return members
        if time.monotonic() > deadline:
            return members
        if not said:
            print("the owners' group is rebalancing; waiting for it to settle")
            said = True
        time.sleep(0.5)


def _listed(reads: frozenset[int] = formats.READS) -> str:
    return "formats " + ", ".join(str(f) for f in sorted(reads))
