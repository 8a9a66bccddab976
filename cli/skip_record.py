"""`pinledger skip-record`: skip a queue record no store commits or no release decodes,
recorded in the ledger (decision 0032).

    pinledger skip-record --queue Q --partition P --offset N [--reason TEXT]

A partition whose owner paused at a record (its log line and /ready give this command
with the offset) resumes once the skip is projected; every other projection of the
partition (a server taking it over, a replay, a move, the verify) passes over the
record too, because the skip is a `RecordSkipped` record in the catalog, not a setting.
The record is read and printed first (its events: job ids, types, enqueues' body sizes
and priorities; or why it cannot be decoded), so the operator sees what is skipped:
the jobs it enqueues never exist, its acks and claims never apply.

Exit status: 0 skipped (or skipped already); 1 not done (the store or Kafka did not
answer: run it again); 2 refused (no such queue or partition, an offset past the
partition's end or below the log's start, a record the projection has passed already,
a cluster whose ledger format has no skips yet).
"""

from __future__ import annotations

import argparse
import getpass
import socket
import time
from collections.abc import Callable

from pinledger.cli.catalog_preflight import preflight
from pinledger.ledger import codec, formats
from pinledger.ledger.events import (
    Actor,
    CatalogEvent,
    Enqueued,
    Event,
    RecordSkipped,
)
from pinledger.ledger.log import Log, LogError, LogRecord, Position, queue_topic
from pinledger.ledger.state import event_local_id
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.skips import REASON_CHARS
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.assembly import open_configured_store
from pinledger.service.config import Config

EXIT_REFUSED = 2
EXIT_NOT_DONE = 1
# How long the command waits for the record (it exists: its offset is below the end).
READ_LIMIT_S = 30.0
# Events of a record listed one by one; the rest are counted.
LISTED = 20


class SkipRefusedError(ValueError):
    """A skip that cannot be made as asked; the message says why and what to do."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", required=True, help="the queue whose record is skipped")
    parser.add_argument("--partition", type=int, required=True, help="its partition")
    parser.add_argument("--offset", type=int, required=True, help="the record's offset")
    parser.add_argument(
        "--reason",
        default="",
        help=f"why, kept with the skip (at most {REASON_CHARS} characters)",
    )


def run(config: Config, args: argparse.Namespace, log: Log) -> int:
    store: LedgerStore | None = None
    try:
        store = open_configured_store(config)
        who = f"{getpass.getuser()}@{socket.gethostname()}"
        actor = Actor(source=f"pinledger:skip-record by {who}", server=socket.gethostname())
        said = skip(
            log,
            store,
            config.topic_prefix,
            RecordSkipped(args.queue, args.partition, args.offset, args.reason),
            actor,
            lambda: int(time.time() * 1000),
            print,
        )
    except SkipRefusedError as exc:
        print(f"not skipped: {exc}")
        return EXIT_REFUSED
    except (StoreError, LogError, TimeoutError) as exc:
        print(f"not skipped: {exc}; run the same command again")
        return EXIT_NOT_DONE
    finally:
        if store is not None:
            store.close()
    print(said)
    return 0


def skip(
    log: Log,
    store: LedgerStore,
    prefix: str,
    wanted: RecordSkipped,
    actor: Actor,
    now_ms: Callable[[], int],
    say: Callable[[str], None],
) -> str:
    """Check the skip, print the record, append the skip; returns the summary line.
    Raises SkipRefusedError for a skip that cannot be made."""
    queue, partition, offset = wanted.name, wanted.partition, wanted.offset
    where = f"{queue}[{partition}] offset {offset}"
    cluster, row = preflight(
        log, prefix, queue, wanted.reason, formats.SKIPS, "skipping a record", SkipRefusedError
    )
    if not 0 <= partition < row.partitions:
        raise SkipRefusedError(
            f"queue {queue!r} has partitions 0..{row.partitions - 1}, not {partition}"
        )
    topic = queue_topic(prefix, queue)
    end = log.end_offset(topic, partition)
    if not 0 <= offset < end:
        raise SkipRefusedError(
            f"{queue}[{partition}] holds offsets below {end}: there is no record at {offset}"
        )
    skipped = store.skipped_records(queue, partition)
    if offset in skipped:
        return f"{where} is skipped already ({skipped[offset] or 'no reason given'})"
    projected = store.offsets([(topic, partition)]).get((topic, partition), 0)
    if projected > offset:
        raise SkipRefusedError(
            f"{where} was projected already (the projection is at offset {projected}): a "
            "record skipped now would be applied in the live tables and passed over by a "
            "replay; nothing to skip"
        )
    record = _read(log, topic, partition, offset)
    if record is None:
        raise SkipRefusedError(
            f"the log no longer holds {where}: it is below the partition's first offset "
            "(the topic's retention removed it)"
        )
    for line in describe(record):
        say(line)
    writer = LedgerWriter(log, prefix)
    writer.follow_format(cluster)
    writer.skip_record(wanted, now_ms(), actor)
    return (
        f"skipped {where}, recorded in the catalog; the partition's owner passes over it "
        "and resumes within seconds"
    )


def _read(log: Log, topic: str, partition: int, offset: int) -> LogRecord | None:
    """The record at `offset` (None: the log starts after it)."""
    reader = log.reader([Position(topic, partition, offset)])
    deadline = time.monotonic() + READ_LIMIT_S
    try:
        while time.monotonic() < deadline:
            for record in reader.poll(10, 200):
                # A reader asked for an offset below the log's start begins at the start.
                return record if record.offset == offset else None
    finally:
        reader.close()
    raise TimeoutError(f"{topic}[{partition}]: the record at offset {offset} did not arrive")


def describe(record: LogRecord) -> list[str]:
    """What a record holds, a line per event (the first LISTED), as the operator sees
    it before skipping it."""
    head = f"record {record.topic}[{record.partition}]@{record.offset}, {len(record.value)} bytes"
    try:
        events = codec.record_events(record.value, record.headers)
    except codec.CodecError as exc:
        return [f"{head}: cannot be decoded ({exc}); it starts {record.value[:60]!r}"]
    lines = [f"{head}: {len(events)} event(s)"]
    for idx, event in enumerate(events[:LISTED]):
        lines.append(f"  {_event_line(record.offset, idx, event)}")
    if len(events) > LISTED:
        lines.append(f"  ... and {len(events) - LISTED} more")
    return lines


def _event_line(offset: int, idx: int, event: Event) -> str:
    tag = codec.tag_of(event)
    if isinstance(event, CatalogEvent):
        return f"{tag}: a catalog event (ignored in a queue partition)"
    job = event_local_id(event, offset, idx)
    if isinstance(event, Enqueued):
        return (
            f"{tag} job {job}: {len(event.body)} body bytes, priority {event.priority}, "
            f"custom status {event.custom_status[:40]!r}"
            + ("" if len(event.custom_status) <= 40 else "...")
        )
    return f"{tag} job {job}"
