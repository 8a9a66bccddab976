"""The queue directory: queue names and partition counts, cached from the projected
catalog so that enqueue does not wait on Postgres."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.log import Log
from pinledger.projections.store import LedgerStore, QueueRow

log = logging.getLogger(__name__)

# A miss re-reads the catalog (a queue just created), at most this often.
_MISS_REREAD_S = 0.05


class QueueDirectory:
    """Queue names and partition counts, from the projected catalog. Cached so that
    enqueue does not wait on Postgres; a miss re-reads (a queue just created)."""

    def __init__(
        self, store: LedgerStore, refresh_s: float = 1.0, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.store = store
        self.clock = clock
        # Told the queue names whenever they change (the server points it at the owner,
        # which subscribes to their topics).
        self.on_change: Callable[[set[str]], None] = lambda _: None
        # Told every queue row on each read (the server points it at the owner, which
        # leaves retired partitions out of its work).
        self.on_rows: Callable[[list[QueueRow]], None] = lambda _: None
        self._queues: dict[str, QueueRow] = {}
        self._read_at = 0.0
        # When the refresh loop last finished a round, worked or not (liveness).
        self.turned_at = clock.monotonic()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._refresh_s = refresh_s
        self.refresh()

    def start(self) -> None:
        """Re-read every `refresh_s`, so a queue deleted through another server stops
        taking enqueues here too."""

        def loop() -> None:
            while not self.clock.sleep(self._refresh_s, self._stop):
                try:
                    self.refresh()
                except Exception as exc:
                    log.warning("cannot refresh the queue list: %s", exc)
                self.turned_at = self.clock.monotonic()

        self._thread = threading.Thread(target=loop, name="queue-directory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def refresh(self) -> None:
        rows = {row.name: row for row in self.store.queues()}
        with self._lock:
            changed = rows.keys() != self._queues.keys()
            self._queues = rows
            self._read_at = self.clock.monotonic()
        if changed:
            self.on_change(set(rows))
        self.on_rows(list(rows.values()))

    def get(self, name: str) -> QueueRow | None:
        row = self._queues.get(name)
        if row is None and self.clock.monotonic() - self._read_at > _MISS_REREAD_S:
            self.refresh()
            row = self._queues.get(name)
        return row

    def get_or_log(self, name: str, log_: Log, topic: str) -> QueueRow | None:
        """Like `get`, falling back to the log: a queue whose topic exists takes jobs
        even while the catalog projection is still catching up (a rebalance)."""
        row = self.get(name)
        if row is None:
            partitions = log_.partition_count(topic)
            if partitions:
                row = QueueRow(name, partitions, 0)
        return row

    def names(self) -> set[str]:
        self.refresh()
        return set(self._queues)

    def rows(self) -> list[QueueRow]:
        """Every queue as last read (the directory re-reads every second)."""
        return list(self._queues.values())
