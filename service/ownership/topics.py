"""Which topics this server's member of the owners' group subscribes to: the catalog,
and the topic of every queue the catalog lists or this server has just created.

Owners subscribe to the queue topics by name, not by a pattern (decision 0008): a
pattern makes kafka-python fetch the metadata of the whole cluster on the thread that
heartbeats. A queue created here is subscribed at once, before the catalog's owner has
projected its creation.

Locking: `_lock` guards the queue names (`_queues`, `_created`), which the queue
directory's thread, Thrift handler threads (createQueue) and the owner and members
threads all touch. It is a leaf lock: nothing else is taken while it is held.
`_subscribed` is the owner thread's alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from pinledger.ledger.clock import Clock
from pinledger.ledger.log import GroupReader, catalog_topic
from pinledger.ledger.writer import LedgerWriter

# How long a queue this server created stays subscribed before the catalog lists it
# (the catalog's owner projects the creation; normally well under a second).
CREATED_GRACE_S = 30.0


class OwnedTopics:
    def __init__(self, prefix: str, writer: LedgerWriter, clock: Clock) -> None:
        self.prefix = prefix
        self.catalog_topic = catalog_topic(prefix)
        self._writer = writer
        self._clock = clock
        self._lock = threading.Lock()
        # The queues to own partitions of: the catalog's, plus those this server just
        # created (name -> until when, monotonic), which the catalog may not list yet.
        self._queues: set[str] = set()
        self._created: dict[str, float] = {}
        # What the group reader was last subscribed to (owner thread only).
        self._subscribed: set[str] = set()

    def set_queues(self, names: Iterable[str]) -> None:
        """The queues the catalog lists (the queue directory calls this when they
        change); the owner thread subscribes to their topics."""
        with self._lock:
            self._queues = set(names)
            for name in self._queues & self._created.keys():
                del self._created[name]

    def add_queue(self, name: str) -> None:
        """A queue this server has just created: own its partitions now, before the
        catalog projection lists it."""
        with self._lock:
            self._created[name] = self._clock.monotonic() + CREATED_GRACE_S

    def wanted_topics(self) -> set[str]:
        with self._lock:
            now = self._clock.monotonic()
            self._created = {q: until for q, until in self._created.items() if until > now}
            queues = self._queues | self._created.keys()
        return {self.catalog_topic} | {self._writer.topic(q) for q in queues}

    def queue_topics(self) -> set[str]:
        """The wanted topics of queues (the catalog's left out)."""
        return self.wanted_topics() - {self.catalog_topic}

    def initial(self) -> set[str]:
        """The topics to join the group with (at start, before the owner thread runs)."""
        self._subscribed = self.wanted_topics()
        return self._subscribed

    def resubscribe(self, reader: GroupReader) -> None:
        """Bring the reader's subscription up to date (owner thread: kafka-python
        wants subscribe called from the polling thread)."""
        wanted = self.wanted_topics()
        if wanted != self._subscribed:
            reader.subscribe(wanted)
            self._subscribed = wanted
