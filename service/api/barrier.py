"""The read barrier: reads wait (bounded by read_wait_s) until the projection holds
what they need: a lookup, the records its descriptors name; a count or a scan, the whole
log of the queue as it was when the call came in; and every call, what this server
appended. A read the projection cannot serve in time fails with ProjectionBehindError (the
partition's owner is gone, moving or far behind): it never answers from tables nobody
is advancing as if they were current."""

from __future__ import annotations

import logging

from pinledger.ledger.log import PartitionKey
from pinledger.projections.store import QueueRow
from pinledger.service.api.core import Api
from pinledger.service.api.errors import ProjectionBehindError

log = logging.getLogger(__name__)

Partition = PartitionKey  # (topic, partition)

_FIRST_PAUSE_S = 0.002
_MAX_PAUSE_S = 0.05
# Waited this long between polls: the offsets asked for may be past the log's end.
_CAP_AFTER_PAUSE_S = 0.016


def wait_projected(api: Api, keys: dict[Partition, int]) -> None:
    """Wait (at most read_wait_s) until the projection holds the record at each
    given offset, and everything this server appended to those partitions."""
    appended = api.writer.appended
    needed = {key: max(offset, appended.get(key, -1)) for key, offset in keys.items()}
    needed = {key: offset for key, offset in needed.items() if offset >= 0}
    deadline = api.clock.monotonic() + api.config.read_wait_s
    pause = _FIRST_PAUSE_S
    capped = False
    while needed:
        reached = api.store.offsets(needed)
        needed = {k: o for k, o in needed.items() if reached.get(k, 0) <= o}
        if needed and not capped and pause >= _CAP_AFTER_PAUSE_S:
            # Still waiting: a descriptor may name an offset the log never reached
            # (a made-up or mistyped one); nothing beyond the log's end is worth
            # waiting for.
            capped = True
            ends = api.writer.log.end_offsets(list(needed))
            needed = {
                k: min(o, max(ends[k] - 1, appended.get(k, -1))) if k in ends else o
                for k, o in needed.items()
            }
            needed = {k: o for k, o in needed.items() if o >= 0}
        if not needed:
            return
        if api.clock.monotonic() >= deadline:
            behind = {k: (reached.get(k, 0), o) for k, o in needed.items()}
            log.info("read refused: the projection did not reach %s", needed)
            raise ProjectionBehindError(behind, api.config.read_wait_s)
        api.clock.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_S)


def settle(api: Api, queue: QueueRow) -> None:
    """Counts, scans and bulk actions see every record in the queue's log as of the
    call (one request for the end offsets), this server's own writes included. Retired
    partitions are left out: they hold no job (a stray one enqueued there by a server
    with a stale queue list is counted once its retirement is undone, within seconds:
    service/ownership/maintenance/retirement.py)."""
    topic = api.writer.topic(queue.name)
    keys = [(topic, p) for p in range(queue.active)]
    ends = api.writer.log.end_offsets(keys)
    wait_projected(api, {key: ends.get(key, 0) - 1 for key in keys})
