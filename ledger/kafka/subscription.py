"""Consume the ledger from another system, with its own Kafka consumer group.

    from pinledger.ledger.kafka.subscription import subscribe

    with subscribe("127.0.0.1:19092", "pinledger.", "billing-audit") as records:
        for record in records:
            for event in record.envelope.events:
                ...  # Enqueued, Claimed, Succeeded, Failed, ... (ledger/events.py)

What you get: every record of every queue's topic under the prefix (new queues are
picked up within a second or so), decoded into an `Envelope` (when, who, and the events
of one append, all in one partition of one queue), with the W3C traceparent of the call
that appended it. Order is the log's within a partition, none across partitions.
A group record (the appends of concurrent calls to one partition share a Kafka record,
docs/decisions/0020-group-commit.md) is yielded as one `LedgerRecord` per call, with
the same offset; `first` is the index of its first event in the Kafka record, so the
job an `Enqueued` at position i creates has local id `offset * 1000 + first + i`
(`ledger.descriptor.local_id_for`).
The events are the ledger's facts as appended, applied or not: to know whether an
event applied (a stale ack does not), fold them through `ledger.state.evolve` per job,
as the projection does, or read the job's history (`pinledger trace`).

Delivery is at least once. The group's offsets are committed in Kafka, covering the
records your loop has finished with (it asked for the next one): before each poll and
on `close()`. A consumer that crashes sees again what it had not finished, and one
that leaves the loop early (break, exception) sees its last record again.
`from_beginning` applies only to a group with no committed offsets yet: True reads
the whole retained log, False only what is appended from now on. Several processes in
the same group share the partitions (Kafka's assignment); different groups each see
everything. pinledger's own partition owners
use the group `<prefix>owners` (never join it: it decides partition ownership) and
keep their offsets in Postgres, so any other group leaves them undisturbed.

`catalog=True` also yields the catalog's records (queue created or deleted), with
`queue=None` and partition 0. A record that cannot be decoded raises
`ledger.codec.CodecError` naming its position.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import NamedTuple

from pinledger.ledger import codec
from pinledger.ledger.events import Envelope
from pinledger.ledger.kafka import KafkaSettings, KafkaSubscriber
from pinledger.ledger.log import KafkaSecurity, catalog_topic, owners_group, queue_of_topic


class LedgerRecord(NamedTuple):
    queue: str | None
    partition: int
    offset: int
    envelope: Envelope
    traceparent: str | None
    first: int = 0


class Subscription:
    """An iterable of `LedgerRecord`s; close it (or use `with`) to leave the group."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        group: str,
        *,
        from_beginning: bool = True,
        catalog: bool = False,
        idle_timeout_s: float | None = None,
        max_records: int = 500,
        security: KafkaSecurity | None = None,
    ) -> None:
        self.prefix = prefix
        self.idle_timeout_s = idle_timeout_s
        self.max_records = max_records
        topics = r"q\..+|catalog" if catalog else r"q\..+"
        self._consumer: KafkaSubscriber | None = KafkaSubscriber(
            KafkaSettings(
                bootstrap=bootstrap,
                client_id="pinledger-sub",
                security=security or KafkaSecurity(),
            ),
            group,
            f"^{re.escape(prefix)}({topics})$",
            from_beginning,
        )
        self._pending: dict[tuple[str, int], int] = {}

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[LedgerRecord]:
        """Records as they arrive; ends when closed or, with `idle_timeout_s`, after
        that long without a record."""
        quiet_since = time.monotonic()
        while self._consumer is not None:
            self.commit()
            records = self._consumer.poll(self.max_records, timeout_ms=200)
            if not records:
                if (
                    self.idle_timeout_s is not None
                    and time.monotonic() - quiet_since >= self.idle_timeout_s
                ):
                    return
                continue
            quiet_since = time.monotonic()
            for record in records:
                try:
                    parts = codec.decode_parts(record.value, record.headers)
                except codec.CodecError as exc:
                    raise codec.CodecError(
                        f"{record.topic}[{record.partition}]@{record.offset}: {exc}"
                    ) from exc
                queue = (
                    None
                    if record.topic == catalog_topic(self.prefix)
                    else queue_of_topic(self.prefix, record.topic)
                )
                for part in parts:
                    yield LedgerRecord(
                        queue,
                        record.partition,
                        record.offset,
                        part.envelope,
                        part.traceparent,
                        part.first,
                    )
                # Asked for the next one: the caller is done with this one.
                self._pending[(record.topic, record.partition)] = record.offset + 1

    def commit(self) -> None:
        """Commit the offsets of every record yielded so far."""
        if self._consumer is not None and self._pending:
            self._consumer.commit(self._pending)
            self._pending = {}

    def close(self) -> None:
        if self._consumer is not None:
            self.commit()
            self._consumer.close()
            self._consumer = None


def subscribe(
    bootstrap: str,
    prefix: str,
    group: str,
    from_beginning: bool = True,
    *,
    catalog: bool = False,
    idle_timeout_s: float | None = None,
    security: KafkaSecurity | None = None,
) -> Subscription:
    """Join consumer group `group` over the ledger under topic prefix `prefix` (see the
    module's documentation for what is delivered and when offsets are committed);
    `security`: how to reach a Kafka that requires TLS or SASL."""
    if group == owners_group(prefix):
        raise ValueError(f"group {group!r} is the servers' partition ownership group")
    return Subscription(
        bootstrap,
        prefix,
        group,
        from_beginning=from_beginning,
        catalog=catalog,
        idle_timeout_s=idle_timeout_s,
        security=security,
    )
