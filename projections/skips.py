"""Records an operator skipped (`pinledger skip-record`: `RecordSkipped` in the catalog,
decision 0032): the queue records every projection passes over as if they held no
event, because no store commits them (Postgres refuses a NUL in text) or no release
decodes them, and they would otherwise stall their partition for good.

A skip holds for a partition of a queue that exists when the skip comes (the store's
insert says the same: projections/*/queries.sql `skip_record`), the first skip of an
offset stands, and a queue's deletion takes its skips with it: a queue created again
under the name has a new topic, whose offsets start at 0 again.

The live owners read a partition's skips from the store's catalog projection when they
adopt it; what reads the log without the store (a replay into a scratch schema, whose
catalog projection may reach a skip after the partition reached the record; the
verify's fold) reads them from the catalog topic first (`catalog_skips`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pinledger.ledger import codec
from pinledger.ledger.events import Envelope, Event, QueueDeleted, RecordSkipped
from pinledger.ledger.log import Log, LogError, catalog_topic
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.partition_log import read_partition
from pinledger.projections.store import QueueRow

# (queue, partition) -> the partition's skipped offsets -> why.
Skips = dict[tuple[str, int], dict[int, str]]

# How much of an operator's reason a store keeps (the fold keeps the same).
REASON_CHARS = 500


def stored_reason(reason: str) -> str:
    """The reason as every store keeps it: bounded, and without the NUL Postgres refuses
    in text (a catalog record no store could commit would stall the whole catalog)."""
    return reason.replace("\x00", "\ufffd")[:REASON_CHARS]


def holds(queues: Mapping[str, QueueRow], skip: RecordSkipped) -> bool:
    """Whether a skip applies, given the queues as they are when it comes."""
    row = queues.get(skip.name)
    return row is not None and 0 <= skip.partition < row.partitions and skip.offset >= 0


def fold_skip(skips: Skips, queues: Mapping[str, QueueRow], event: Event) -> None:
    """Fold one catalog event into `skips`, given the queues as folded before it (call
    before `fold_queue_event` of the same event)."""
    if isinstance(event, RecordSkipped):
        if holds(queues, event):
            offsets = skips.setdefault((event.name, event.partition), {})
            offsets.setdefault(event.offset, stored_reason(event.reason))
    elif isinstance(event, QueueDeleted):
        for key in [key for key in skips if key[0] == event.name]:
            del skips[key]


def skips_of(envelopes: Iterable[Envelope]) -> Skips:
    """The skips the catalog's envelopes leave, in log order."""
    queues: dict[str, QueueRow] = {}
    skips: Skips = {}
    for envelope in envelopes:
        for event in envelope.events:
            fold_skip(skips, queues, event)
            fold_queue_event(queues, event, envelope.at)
    return skips


def catalog_skips(log: Log, prefix: str) -> Skips:
    """The skips of the whole catalog topic, read from the log (a few records per
    queue, kept forever). A time or offset bound of a replay does not bound them: a
    record skipped later could not have been projected at any moment either."""
    topic = catalog_topic(prefix)
    end = log.end_offsets([(topic, 0)]).get((topic, 0), 0)  # no catalog yet: nothing
    try:
        return skips_of(codec.decode(r.value) for r in read_partition(log, topic, 0, 0, end))
    except TimeoutError as exc:
        raise LogError(f"catalog {topic}: {exc}") from exc
