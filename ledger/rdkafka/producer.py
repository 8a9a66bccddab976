"""The appends: one librdkafka producer per log, and the one thread that resolves the
appending callers' waits from its delivery reports.

`produce()` only queues a record in C; librdkafka's own threads batch, send and
retry without the GIL. Delivery reports are handed over by `poll()`, which this
adapter calls on one thread of its own (`<client id>-rdkafka-poll`): each report
completes the wait of the caller that appended the record. A caller holds the GIL
only to queue its records and to wake up."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pinledger.ledger.kafka.settings import KafkaSettings
from pinledger.ledger.known_partitions import learn_partition
from pinledger.ledger.log import Append, LogError, NotAppendedError
from pinledger.ledger.rdkafka import config
from pinledger.ledger.rdkafka.errors import (
    REFUSED,
    UNREACHABLE,
    error_of,
    log_error,
    timed_out,
    unwritten,
)

log = logging.getLogger(__name__)

# The poll thread wakes at least this often to see whether the log was closed; a
# delivery report wakes it at once.
_POLL_S = 0.1
# A metadata request for one topic, when the producer refused a partition it has not seen.
_LIST_TIMEOUT_S = 2.0
_CLOSE_TIMEOUT_S = 5.0
# While no broker answers, a probe asks for metadata with this backoff (the kafka-python
# adapter rebuilds its producer with the same).
_PROBE_FIRST_PAUSE_S = 0.5
_PROBE_MAX_PAUSE_S = 5.0
_PROBE_TIMEOUT_S = 1.0
_UNANSWERED = KafkaError(
    KafkaError._TRANSPORT, "no broker has answered since the last failed append"
)
# What produce() takes as headers; ours are (str, bytes) pairs.
_Headers = list[tuple[str, str | bytes | None]]


class AppendTimeoutError(LogError):
    """No acknowledgement within the append timeout; the records may still land."""


class _Delivery:
    """The wait of one append: the offsets of its records as their reports come in,
    or the first error. Reports come on the poll thread only, in any order."""

    __slots__ = ("_done", "_left", "error", "offsets", "refused")

    def __init__(self, count: int) -> None:
        self.offsets = [-1] * count
        self.error: KafkaError | None = None
        # Records reported failed that are certainly not in the log (errors.REFUSED).
        self.refused = 0
        self._left = count
        self._done = threading.Event()

    def report(self, index: int, error: KafkaError | None, message: Message) -> None:
        self._left -= 1
        if error is not None:
            if self.error is None:
                self.error = error
            if error.code() in REFUSED:
                self.refused += 1
            self._done.set()  # the append has failed: no need to wait for the others
            return
        offset = message.offset()
        self.offsets[index] = -1 if offset is None else offset
        if self._left == 0:
            self._done.set()

    @property
    def unwritten(self) -> bool:
        """Whether every record has been reported refused: none is in the log."""
        return self.refused == len(self.offsets)

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)


class Appender:
    """Appends records and waits for their acknowledgement (acks=all, idempotent).
    Thread-safe: callers append concurrently, and their records share produce requests."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._bootstrap = settings.bootstrap
        self._timeout_s = settings.append_timeout_ms / 1000
        self._lock = threading.Lock()
        # Set by the error callback when librdkafka cannot go on with the producer.
        self._fatal: KafkaError | None = None
        # Set when an append went unanswered, cleared by the probe once a broker
        # answers: meanwhile appends fail at once (`_probe`).
        self._unanswered = threading.Event()
        self._closed = threading.Event()
        self._producer = self._new_producer()
        self._poller = threading.Thread(
            target=self._poll, name=f"{settings.client_id}-rdkafka-poll", daemon=True
        )
        self._poller.start()

    def _new_producer(self) -> Producer:
        try:
            return Producer({**config.producer(self._settings), "error_cb": self._on_error})
        except KafkaException as exc:  # a setting librdkafka refuses
            raise log_error(error_of(exc), "cannot make a Kafka producer", self._bootstrap) from exc

    def _learned(self, exc: KafkaException, record: Append, started: float) -> bool:
        """Whether a refused record names a partition added since the producer read the
        metadata, which it now knows (it asked again): then produce it once more."""
        if error_of(exc).code() != KafkaError._UNKNOWN_PARTITION:
            return False
        left = self._timeout_s - (time.monotonic() - started)
        return learn_partition(
            record.topic, record.partition, self._partition_count, _nothing, left
        )

    def _partition_count(self, topic: str) -> int:
        """The partitions a broker says the topic has; librdkafka's metadata request for
        one topic also updates the producer's own cache, so it is the refresh too."""
        try:
            found = self._producer.list_topics(topic, timeout=_LIST_TIMEOUT_S).topics.get(topic)
        except KafkaException:
            return 0  # the produce will say why
        return 0 if found is None or found.error is not None else len(found.partitions)

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's errors that belong to no record: most are passing (a broker
        disconnected; librdkafka reconnects and retries by itself). A fatal one leaves
        the producer unusable: the next append replaces it."""
        if error.fatal():
            log.error("the Kafka producer failed for good: %s; replacing it", error.str())
            self._fatal = error
        else:
            log.debug("Kafka producer: %s", error.str())

    def _poll(self) -> None:
        while not self._closed.is_set():
            try:
                self._producer.poll(_POLL_S)
            except Exception:  # a callback's bug must not stop every append's answer
                log.exception("serving the Kafka producer's delivery reports")

    def _current(self) -> Producer:
        """The producer to append with: a new one after a fatal error. librdkafka
        builds a producer without waiting for a broker, so it is swapped at once; the
        old one fails its waiting records (purge) and is closed on a thread of its own."""
        if self._fatal is None:  # without the lock: read on every append
            return self._producer
        with self._lock:
            if self._fatal is None:  # another caller replaced it meanwhile
                return self._producer
            reason, self._fatal = self._fatal, None
            old, self._producer = self._producer, self._new_producer()
        threading.Thread(
            target=_retire, args=(old,), name="rdkafka-producer-retire", daemon=True
        ).start()
        log.warning("replaced the Kafka producer after %s", reason.name())
        return self._producer

    def append(self, appends: Sequence[Append]) -> list[int]:
        if not appends:
            return []
        what = f"append to Kafka at {self._bootstrap} failed"
        if self._closed.is_set():
            raise NotAppendedError(f"{what}: the log is closed")
        if self._unanswered.is_set():
            raise log_error(
                _UNANSWERED, f"{what} (reconnecting)", self._bootstrap, NotAppendedError
            )
        producer = self._current()
        delivery = _Delivery(len(appends))
        started = time.monotonic()
        # Records queued so far: once one is, a failure may leave it to be sent.
        queued = 0
        try:
            for index, record in enumerate(appends):
                report = functools.partial(delivery.report, index)
                try:
                    _produce(producer, record, report)
                except KafkaException as exc:
                    if not self._learned(exc, record, started):
                        raise
                    _produce(producer, record, report)
                queued += 1
        except KafkaException as exc:  # refused before queueing: too large, unknown, ...
            error = error_of(exc)
            kind = LogError if queued else unwritten(error)
            raise log_error(error, what, self._bootstrap, kind) from exc
        except BufferError as exc:  # queue.buffering.max.messages records already queued
            raise (LogError if queued else NotAppendedError)(
                f"{what}: the producer's queue is full ({exc}). Kafka takes records "
                "slower than they come: check the broker's load."
            ) from exc
        # The same timeout as the kafka-python adapter: from the first record queued;
        # a record may still land after it (librdkafka gives up at message.timeout.ms).
        if not delivery.wait(max(0.001, self._timeout_s - (time.monotonic() - started))):
            self._start_probe(appends[0].topic)
            raise AppendTimeoutError(str(timed_out(what, self._bootstrap, self._timeout_s)))
        if delivery.error is not None:
            if delivery.error.code() in UNREACHABLE:
                self._start_probe(appends[0].topic)
            kind = unwritten(delivery.error) if delivery.unwritten else LogError
            raise log_error(delivery.error, what, self._bootstrap, kind)
        if min(delivery.offsets) < 0:
            # Delivered, but librdkafka did not say where (seen once in CI on a topic
            # created a moment before): offsets make descriptors, so never answer one.
            raise LogError(
                f"{what}: Kafka took the records but did not report their offsets; "
                "the append may be in the log: retry it"
            )
        return delivery.offsets

    def _start_probe(self, topic: str) -> None:
        """After an append went unanswered, fail later ones at once until a broker
        answers, as the kafka-python adapter does while it rebuilds its producer: in an
        outage only the first calls wait out the append timeout, the others answer at
        once that Kafka is down. librdkafka keeps reconnecting by itself; the probe only
        asks it, with backoff, for the topic's metadata (any broker's answer will do,
        as for the kafka-python adapter: a topic deleted meanwhile is an answer too)."""
        with self._lock:
            if self._unanswered.is_set() or self._closed.is_set():
                return
            self._unanswered.set()
        threading.Thread(
            target=self._probe, args=(topic,), name="rdkafka-producer-probe", daemon=True
        ).start()

    def _probe(self, topic: str) -> None:
        pause = _PROBE_FIRST_PAUSE_S
        while not self._closed.is_set():
            try:
                self._producer.list_topics(topic, timeout=_PROBE_TIMEOUT_S)
            except KafkaException as exc:
                log.info("no Kafka broker answers yet (%s); asking again", error_of(exc).str())
                self._closed.wait(pause)
                pause = min(pause * 2, _PROBE_MAX_PAUSE_S)
                continue
            log.warning("a Kafka broker answers again: appending")
            self._unanswered.clear()
            return

    def close(self) -> None:
        """Stop serving reports, then wait a bounded time for what is queued: records
        Kafka cannot take (it is down) must not hold up a shutdown."""
        self._closed.set()
        self._poller.join()
        _retire(self._producer)


def _retire(producer: Producer) -> None:
    left = producer.flush(_CLOSE_TIMEOUT_S)  # serves the last reports too
    if left:
        log.warning("closing the Kafka producer with %d records not acknowledged", left)
        producer.purge()
        producer.flush(0)  # tells their callers
    producer.close()


def _produce(producer: Producer, record: Append, report: Callable[..., None]) -> None:
    producer.produce(
        record.topic,
        record.value,
        partition=record.partition,
        # Covariant in fact: confluent-kafka only reads the list.
        headers=cast(_Headers, record.headers) or None,
        on_delivery=report,
    )


def _nothing(_: str) -> None:
    """No refresh of its own: asking for the count (list_topics) refreshes."""
