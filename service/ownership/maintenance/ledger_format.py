"""The cluster's ledger format as one server follows it (ledger/formats.py, decision
0025): read from the catalog topic when the server starts, where a format this release
cannot read stops it before it joins the owners' group, and again on every members
tick (a duty of the members lane, first of its lane: the duties after it write with the
format it read), so that a `pinledger upgrade-format` reaches every server within a
tick. What the cluster's format allows is handed to the writer (group records from
format 2 on)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pinledger.ledger import codec, formats
from pinledger.ledger.codec import CodecError
from pinledger.ledger.log import Log, LogError, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.partition_log import read_partition
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.duty import Duty, Schedule
from pinledger.service.ownership.peers import MEMBERS_EVERY_S

log = logging.getLogger(__name__)

# The cluster's ledger format as this server follows it, and the newest it reads: what
# an operator watches during a rolling upgrade (docs/guides/upgrading.md).
FORMAT_GAUGE = catalogue.LEDGER_FORMAT
READS_GAUGE = catalogue.LEDGER_FORMAT_NEWEST_READ


class UnreadableFormatError(RuntimeError):
    """The cluster writes a ledger format this release cannot read."""


def read_cluster_format(
    kafka: Log, prefix: str, start: int = 0, current: int = formats.PLAIN
) -> tuple[int, int]:
    """The cluster's format after the catalog's records from `start` on, and the offset
    to read from next time. Raises LogError when the catalog cannot be read."""
    topic = catalog_topic(prefix)
    end = kafka.end_offset(topic, 0)
    try:
        for record in read_partition(kafka, topic, 0, start, end):
            try:
                events = codec.record_events(record.value, record.headers)
            except CodecError as exc:
                if formats.unreadable(current) is not None:
                    # A record of the newer format raised before it: the answer is known.
                    return current, record.offset
                raise LogError(
                    f"the catalog {topic} holds a record this release cannot read at offset "
                    f"{record.offset} ({exc}); upgrade this server"
                ) from exc
            current = formats.folded(current, events)
    except TimeoutError as exc:
        raise LogError(f"cannot read the catalog {topic} to its end ({exc})") from exc
    return current, max(start, end)


class ClusterFormat(Duty):
    """The cluster's format as this server follows it (every server)."""

    name = "ledger-format"

    def __init__(
        self,
        kafka: Log,
        prefix: str,
        writer: LedgerWriter,
        metrics: Metrics | None = None,
        on_unreadable: Callable[[str], None] = lambda _: None,
    ) -> None:
        """`on_unreadable(why)`: the format was raised past what this release reads
        while the server ran (the server stops: it would not read the records)."""
        self._kafka = kafka
        self._prefix = prefix
        self._writer = writer
        self._on_unreadable = on_unreadable
        self._metrics = metrics
        self._next = 0
        self._started = False
        self.current = formats.PLAIN
        self.schedule = Schedule(MEMBERS_EVERY_S)

    def start(self) -> None:
        """Read the catalog's format; raise UnreadableFormatError when this release cannot
        read it (the server must not join)."""
        self.refresh()
        problem = formats.unreadable(self.current)
        if problem is not None:
            raise UnreadableFormatError(problem)
        self._started = True

    def run(self, now_ms: int) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Read the catalog's records since the last refresh (raises LogError)."""
        before = self.current
        self.current, self._next = read_cluster_format(
            self._kafka, self._prefix, self._next, self.current
        )
        self._writer.follow_format(self.current)
        if self._metrics is not None:
            self._metrics.set_gauge(FORMAT_GAUGE, self.current)
            self._metrics.set_gauge(READS_GAUGE, formats.LATEST)
        if self.current != before:
            problem = formats.unreadable(self.current)
            if problem is None:
                log.info("the cluster's ledger format is %d", self.current)
            elif self._started:  # before that, start() refuses
                log.error("this server stops: %s", problem)
                self._on_unreadable(problem)
