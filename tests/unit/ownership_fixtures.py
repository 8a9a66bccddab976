"""Parts the ownership unit tests share: owned partitions with their ready buffers, the
partitions table over the fakes, and a writer that records what would be appended."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import cast

from pinledger.ledger.events import Actor
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import LogError, NotAppendedError
from pinledger.ledger.state import Job
from pinledger.ledger.writer import Batch, Traced
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import PartitionProjector
from pinledger.service.observability.ledger_metrics import LedgerMetrics
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.ready_buffer import ReadyBuffer


class RecordingWriter:
    """Records what would be appended, and each round trip's batches with their trace
    contexts; fails while `failing` is set, with `failure`: by default an error that
    says nothing was written (it records nothing then), or a plain LogError that leaves
    it open."""

    def __init__(self) -> None:
        self.appended: list[Batch] = []
        self.round_trips: list[list[tuple[Batch, str | None]]] = []
        self.failing = False
        self.failure: type[LogError] = NotAppendedError

    def append_many(
        self,
        batches: Sequence[Batch],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[int]:
        return self.append_traced([(batches, traceparent)], at, actor)[0]

    def append_traced(self, sets: Sequence[Traced], at: int, actor: Actor) -> list[list[int]]:
        if self.failing:
            raise self.failure("broker away")
        self.round_trips.append([(batch, tp) for batches, tp in sets for batch in batches])
        self.appended.extend(batch for batches, _ in sets for batch in batches)
        return [list(range(len(batches))) for batches, _ in sets]


def make_owned(
    partition: int,
    jobs: Sequence[Job] = (),
    *,
    next_offset: int = 0,
    target: int = 0,
    serving: bool = False,
    store: object = None,
) -> Owned:
    """A partition of queue `mail` (topic p.q.mail) owned with these unfinished jobs;
    its projector only tells how far it has projected, and the store it serves from."""
    buffer = ReadyBuffer(max_priority=3)
    buffer.load(jobs)
    projector = cast(PartitionProjector, SimpleNamespace(next_offset=next_offset, store=store))
    return Owned("mail", "p.q.mail", partition, projector, buffer, target=target, serving=serving)


def make_partitions(*owned: Owned, log: FakeLog | None = None) -> Partitions:
    """The ownership table of topic prefix p. holding `owned`, over a FakeStore and a
    FakeLog (this one when given)."""
    metrics = Metrics()
    table = Partitions(
        "p.",
        3,
        FakeStore(),
        log or FakeLog(),
        metrics,
        LedgerMetrics(metrics),
        lambda: None,
    )
    for o in owned:
        table.owned[(o.topic, o.partition)] = o
    return table
