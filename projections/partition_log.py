"""Reading one partition of the log between two offsets, whole: what every rebuild
from the log starts with (the verify's fold, the catalog read straight from the log, its
skips, the ledger format)."""

from __future__ import annotations

from collections.abc import Iterator

from pinledger.ledger.log import Log, LogRecord, Position

# Records per poll of the log.
POLL_RECORDS = 5000
# Polls that bring nothing before a partition is declared stuck (200 ms each).
IDLE_POLLS = 150


def read_partition(
    log: Log, topic: str, partition: int, start: int, end: int
) -> Iterator[LogRecord]:
    """The records of one partition in [start, end), in offset order."""
    if start >= end:
        return
    reader = log.reader([Position(topic, partition, start)])
    try:
        idle = 0
        while True:
            records = reader.poll(POLL_RECORDS, 200)
            if not records:
                idle += 1
                if idle >= IDLE_POLLS:
                    raise TimeoutError(f"{topic}[{partition}]: no records before offset {end}")
                continue
            idle = 0
            for record in records:
                if record.offset >= end:
                    return
                if record.offset >= start:
                    yield record
            if records[-1].offset >= end - 1:
                return
    finally:
        reader.close()
