"""What the pages read and act through, assembled by whoever serves them (the server,
or the standalone `pinledger dashboard`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pinledger.dashboard.auth import Sessions
from pinledger.ledger.events import Actor
from pinledger.ledger.log import GroupMember
from pinledger.ledger.writer import LedgerWriter, Traced
from pinledger.projections.asof import QueueAsOf
from pinledger.service.api.core import Api, DequeuedJob

# A queue as it was at a moment (ms): a bounded replay into a scratch schema
# (projections/asof.py), built by the assembler, which knows the adapters.
# (queue, moment, due jobs to list, two descriptors to explain or none)
AsOfReader = Callable[[str, int, int, Sequence[str]], QueueAsOf]


@dataclass(frozen=True, slots=True)
class Backend:
    api: Api
    # The owners' consumer group: which server owns each partition.
    owners: Callable[[], list[GroupMember]]
    as_of: AsOfReader
    sessions: Sessions
    # e.g. https://jaeger.example/trace/{trace_id}; empty: trace ids are not links.
    trace_url_template: str = ""


class NoOwner:
    """The standalone dashboard owns no partitions: it reads the projection the servers
    keep and appends its actions to the log, which the owners apply."""

    unavailable: str | None = None

    def __init__(self, writer: LedgerWriter) -> None:
        self.writer = writer

    def add_queue(self, name: str) -> None:
        pass

    def serves_all(self, queue: str, partitions: int) -> bool:
        return False

    def peers_for(self, queue: str) -> list[str]:
        return []

    def is_peer(self, address: str) -> bool:
        return False

    def peek(
        self, queue: str, limit: int, now: int, coverage: float = 1.0
    ) -> Sequence[DequeuedJob]:
        return []

    def note_dequeue(self, queue: str, jobs: int) -> None:
        pass  # a dashboard answers no worker's dequeue: nothing to measure

    def dequeue(
        self,
        queue: str,
        limit: int,
        now: int,
        actor: Actor,
        coverage: float = 1.0,
        alongside: Traced | None = None,
    ) -> Sequence[DequeuedJob]:
        """Nothing to claim here; a dequeue's acks are appended all the same."""
        if alongside is not None:
            self.writer.append_many(alongside[0], now, actor, alongside[1])
        return []
