"""The members tick (every server, every MEMBERS_EVERY_S): list the owners' group's live
members, then, in this order because each needs the list just read,

- tell the rate limits this server's share of each queue's partitions, when it changed
  (peers.py's `rate_shares`; service/api/ratelimit.py),
- run the watchdog (watchdog.py): rebalance requests for unserved partitions, the
  projection lag, the stuck-loop report,
- let the producer forget deleted topics (decision 0007: kafka-python's producer would
  otherwise re-request their metadata forever).

A tick whose listing Kafka did not answer does none of them (peers.py logs it).
The last duty of the members lane (duties.py), after the ledger format and the queue
resizes, as the owner's members tick always ran them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from pinledger.ledger.log import GroupMember, Log, LogError
from pinledger.service.ownership.maintenance.duty import Duty, Schedule
from pinledger.service.ownership.maintenance.watchdog import Watchdog
from pinledger.service.ownership.peers import MEMBERS_EVERY_S, Peers, rate_shares

log = logging.getLogger(__name__)


class Members(Duty):
    name = "members"

    def __init__(
        self,
        peers: Peers,
        watchdog: Watchdog,
        kafka: Log,
        prefix: str,
        retired_from: Callable[[str], int | None],
        on_rate_shares: Callable[[Mapping[str, float]], None],
    ) -> None:
        """`on_rate_shares`: told, when it changes, the fraction of each queue's
        partitions this server owns (its share of the queue's rate limit)."""
        self.peers = peers
        self.watchdog = watchdog
        self.kafka = kafka
        self.prefix = prefix
        self.retired_from = retired_from
        self.on_rate_shares = on_rate_shares
        # This server's share of each queue's partitions, as last told (None before the
        # first tick that saw them).
        self.rate_shares: dict[str, float] | None = None
        self.schedule = Schedule(MEMBERS_EVERY_S)

    def run(self, now_ms: int) -> None:
        members = self.peers.refresh()
        if members is None:
            return
        self._share_rates(members)
        self.watchdog.check(members)
        try:
            self.kafka.forget_deleted_topics()
        except LogError as exc:
            log.warning("cannot check which topics were deleted: %s", exc)

    def _share_rates(self, members: Sequence[GroupMember]) -> None:
        """Tell `on_rate_shares` this server's share of each queue's partitions when it
        changed; a group between generations (no partition assigned) changes nothing."""
        if not any(member.partitions for member in members):
            return
        shares = rate_shares(members, self.peers.member_id, self.prefix, self.retired_from)
        if shares != self.rate_shares:
            self.rate_shares = shares
            self.on_rate_shares(shares)
