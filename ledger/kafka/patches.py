"""Every access to kafka-python's internals, in one place, behind a version check.

kafka-python 3.0.12 has defects that left queues unserved (decision 0007): a rejoin
lost when a poll times out mid-join, a producer that spins on a deleted topic's
partitions, deleted topics tracked forever, and a producer that refuses every record
for good once the broker refused one (too large). The workarounds below reach into its
private attributes (`_coordinator`, `_join_task`, `_metadata._topics`,
`_accumulator._batches`, ...), which another version may rename or change in meaning.
So the adapter refuses to start on a version they were not verified on
(`check_kafka_python`, called when a KafkaLog or a subscriber is constructed). To adopt
another version: run tests/integration/test_kafka_log.py and tests/contract against it,
re-read each workaround here, then add it to TESTED_KAFKA_PYTHON. When upstream fixes
a defect, drop its workaround and keep its test.
"""

from __future__ import annotations

import functools
import logging
import selectors
import time
from collections.abc import Callable
from typing import Any

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.cluster import ClusterMetadata
from kafka.coordinator.base import MemberState
from kafka.coordinator.consumer import ConsumerCoordinator
from kafka.coordinator.heartbeat import Heartbeat
from kafka.errors import UnknownTopicOrPartitionError
from kafka.net.inet import KafkaNetSocket
from kafka.net.selector import NetworkSelector, Task
from kafka.producer.record_accumulator import RecordAccumulator
from kafka.producer.transaction_manager import TransactionManager
from kafka.protocol.metadata import CoordinatorType

from pinledger.ledger.log import LogError

log = logging.getLogger(__name__)

# The kafka-python versions every workaround below was verified on (decision 0007).
TESTED_KAFKA_PYTHON = frozenset({"3.0.12"})

# How long a poll may take while its consumer (re)joins its group: long enough for the
# join to finish inside the poll (see poll_group).
_JOIN_BUDGET_MS = 5000
# The longest a group poll waits before looking whether a rejoin is wanted.
_POLL_SLICE_MS = 20


@functools.cache  # a check that passed is not repeated; one that failed is
def check_kafka_python() -> None:
    """Fail loudly, once per process, on a kafka-python version the workarounds were
    not verified on, or one lacking the internals they use."""
    version = str(getattr(kafka, "__version__", "unknown"))
    if version not in TESTED_KAFKA_PYTHON:
        raise LogError(
            f"kafka-python {version} is installed, but pinledger's Kafka adapter is "
            f"tested with kafka-python {', '.join(sorted(TESTED_KAFKA_PYTHON))} only: it "
            "works around defects of that version through its internals "
            "(docs/decisions/0007-kafka-python-workarounds.md). Install it with "
            "`pip install 'kafka-python[crc32c]==3.0.12'`; to adopt another version, see "
            "ledger/kafka/patches.py."
        )
    missing = [
        f"{cls.__name__}.{name}"
        for cls, name in (
            (ConsumerCoordinator, "request_rejoin"),
            (ConsumerCoordinator, "need_rejoin"),
            (ConsumerCoordinator, "poll"),
            (Heartbeat, "received_heartbeat"),
            (RecordAccumulator, "_tp_lock"),
            (RecordAccumulator, "deallocate"),
            (ClusterMetadata, "get_coordinator"),
            (TransactionManager, "has_fatal_error"),
            (KafkaNetSocket, "sock_connect"),
            (NetworkSelector, "register_event"),
        )
        if not hasattr(cls, name)
    ]
    if missing:
        raise LogError(
            f"kafka-python {version} lacks {', '.join(missing)}, which pinledger's "
            "workarounds use (ledger/kafka/patches.py): reinstall kafka-python "
            f"{', '.join(sorted(TESTED_KAFKA_PYTHON))}."
        )
    close_failed_connects()
    register_without_repr()


def register_without_repr() -> None:
    """Register an I/O event without formatting a socket's repr. kafka-python 3.0.12's
    `NetworkSelector.register_event` asks the stdlib selector for the socket's key and,
    when it is not registered yet (every send and every read wait of a connection that
    was idle), catches the KeyError, whose message the stdlib builds twice with
    `repr(socket)` (a getsockname and a getpeername each). py-spy put that at a quarter
    of the producer's network thread, with the GIL held (docs/performance-history.md). Same
    logic, with a dictionary lookup instead. Wrapped once per process (idempotent)."""
    original = NetworkSelector.register_event
    if getattr(original, "_pinledger_no_repr", False):
        return

    def register_event(self: NetworkSelector, fileobj: Any, event: int, task: Any) -> None:
        selector = self._selector
        try:
            key = selector._fd_to_key.get(selector._fileobj_lookup(fileobj))
        except (KeyError, ValueError):  # a closed socket: let the original say so
            key = None
        if key is not None:
            original(self, fileobj, event, task)  # already registered: modify
            return
        if not isinstance(task, Task):
            task = Task(task)
        data = (task, None) if event == selectors.EVENT_READ else (None, task)
        selector.register(fileobj, event, data)

    register_event._pinledger_no_repr = True  # type: ignore[attr-defined]
    NetworkSelector.register_event = register_event


def close_failed_connects() -> None:
    """Close the socket of a failed connect. kafka-python 3.0.12 opens a socket per
    connection attempt and, when the connect fails (a broker down: refused, reset,
    timed out), raises with the socket still open, leaving it to the garbage
    collector: one file descriptor per retry per down broker until a collection, and
    a ResourceWarning each. Wrapped once per process (idempotent)."""
    original = KafkaNetSocket.sock_connect
    if getattr(original, "_pinledger_closes_on_failure", False):
        return

    async def sock_connect(
        self: KafkaNetSocket, net: Any, sock: Any, sockaddr: Any, timeout_at: Any = None
    ) -> Any:
        try:
            return await original(self, net, sock, sockaddr, timeout_at=timeout_at)
        except BaseException:
            sock.close()
            raise

    sock_connect._pinledger_closes_on_failure = True  # type: ignore[attr-defined]
    KafkaNetSocket.sock_connect = sock_connect


def poll_group(
    consumer: KafkaConsumer,
    max_records: int,
    timeout_ms: int,
    until: Callable[[], bool] = lambda: False,
) -> dict[Any, Any]:
    """Poll a consumer of a group without losing a rejoin to kafka-python 3.0.12's
    join race. When a rejoin is caused by a metadata change (a topic created that
    matches the subscription pattern: every createQueue) and the poll's time runs out
    before SyncGroup answers, the join finishes in the background and nothing ever
    completes it: the assignment is never applied, heartbeats stay disabled, and Kafka
    evicts the member after its session timeout (reproduced with 5 ms polls; with the
    owners' 200 ms polls it happened under load in CI, leaving queues unserved).
    So a rejoin gets the time to finish before records are polled (the coordinator's
    own poll, which KafkaConsumer.poll runs first on the same thread), and a join that
    finished uncollected is started again. `_coordinator` is kafka-python's own.
    The poll also ends once `until()` holds (checked between slices).
    Returns kafka-python's batches of records by partition."""
    coordinator = consumer._coordinator
    join = coordinator._join_task
    if coordinator.need_rejoin() or (join is not None and not join.is_done):
        coordinator.poll(timeout_ms=_JOIN_BUDGET_MS)
    # In slices, so that a rebalance the heartbeat learnt of (or a rejoin asked for from
    # another thread) ends the poll within a slice, not at its timeout: the time the
    # others wait for this member to rejoin (decision 0039). A fetch in flight carries
    # over from one slice to the next.
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        left_ms = max(0, int((deadline - time.monotonic()) * 1000))
        batches: dict[Any, Any] = consumer.poll(
            timeout_ms=min(_POLL_SLICE_MS, left_ms), max_records=max_records
        )
        if batches or left_ms <= _POLL_SLICE_MS or coordinator.need_rejoin() or until():
            break
    join = coordinator._join_task
    if join is not None and join.is_done and not coordinator.need_rejoin():
        log.info(
            "group %s: a rejoin finished while nobody waited for it; joining again",
            coordinator.group_id,
        )
        coordinator.request_rejoin()
    return batches


def request_rejoin(consumer: KafkaConsumer) -> None:
    """Make the consumer's next poll rejoin its group. There is no public call for this
    in kafka-python 3; `request_rejoin` is the coordinator's own (it only sets a flag,
    so any thread may call it; a poll under way in `poll_group` returns within a
    slice)."""
    consumer._coordinator.request_rejoin()


def track_confirmations(consumer: KafkaConsumer) -> None:
    """Record, on the consumer's heartbeat, the send time of each heartbeat the
    coordinator answered (`confirmed_at`). kafka-python keeps only the last send and
    the last receive, and a heartbeat sent after the one answered overwrites the send
    time; this wraps the instance's `received_heartbeat`, which its heartbeat loop calls
    right after an answer, while `last_send` is still that heartbeat's."""
    heartbeat = consumer._coordinator.heartbeat
    received = heartbeat.received_heartbeat
    heartbeat.answered_send_at = float("-inf")

    def confirmed() -> None:
        heartbeat.answered_send_at = heartbeat.last_send
        received()

    heartbeat.received_heartbeat = confirmed


def confirmed_at(consumer: KafkaConsumer) -> float | None:
    """When the group last confirmed the consumer's membership (time.monotonic): the
    send time of the last heartbeat answered, or the end of the join that made it a
    member (`last_reset`, set when heartbeats start after a join); None while it is not
    a member (no member id, or not joined)."""
    coordinator = consumer._coordinator
    if coordinator.state is MemberState.UNJOINED or not coordinator._generation.has_member_id():
        return None
    heartbeat = coordinator.heartbeat
    answered = float(getattr(heartbeat, "answered_send_at", float("-inf")))
    return max(answered, float(heartbeat.last_reset))


def forget_group_coordinator(admin: KafkaAdminClient, group: str) -> None:
    """Make the admin client look up the group's coordinator again on its next call.
    kafka-python 3.0.12 caches a group's coordinator for the life of the client and
    never drops it: after the brokers restart, the coordinator has usually moved, and
    every describe of the group answers NotCoordinator from then on (measured: the
    whole cluster restarted, 15 tries over 30 s, all NotCoordinator), so the owners saw
    a group without members and asked for rebalance after rebalance."""
    cluster = admin._manager.cluster
    with cluster._lock:
        cluster._coordinators.pop((CoordinatorType.GROUP, group), None)


def producer_topics(producer: KafkaProducer) -> set[str]:
    """The topics the producer tracks: those in its metadata and its accumulator."""
    tracked = set(producer._metadata._topics)
    tracked |= {tp.topic for tp in list(producer._accumulator._batches)}
    return tracked


def forget_deleted(producer: KafkaProducer, existing: set[str]) -> None:
    """Make the producer forget topics the broker no longer has (deleted queues).
    kafka-python's producer never forgets a topic it once wrote to (Java's does,
    after metadata.max.idle.ms), and two things follow, neither reachable through
    a public call:

    - its metadata keeps asking for the topic every retry backoff (100 ms), logging
      an error each time, for as long as the process runs;
    - its accumulator keeps the topic's partitions, and a partition without a
      leader makes the I/O thread request metadata on every pass of its loop,
      waking itself up each time: once the producer writes again it spins a whole
      core (2.9 s of CPU in 3 s measured), starving the owner's group heartbeats
      until Kafka evicts it.

    Records still waiting for such a topic can never be delivered: they fail now,
    with the reason, instead of at the delivery timeout."""
    metadata = producer._metadata
    gone = metadata._topics - existing
    accumulator = producer._accumulator
    stale = [tp for tp in list(accumulator._batches) if tp.topic not in existing]
    if not gone and not stale:
        return
    with metadata._lock:
        # Replaced, not mutated: the I/O thread iterates it to build requests.
        metadata._topics = metadata._topics - gone
    error = UnknownTopicOrPartitionError("the topic was deleted (its queue was deleted)")
    for tp in stale:
        aborted = []
        with accumulator._tp_lock(tp):
            queued = accumulator._batches.get(tp)
            # Drained batches are in flight: the broker's answer completes them.
            while queued and queued[0].drained is None and not queued[0].is_done:
                batch = queued.popleft()
                batch.records.close()
                aborted.append(batch)
            if not queued:
                accumulator._batches.pop(tp, None)
        for batch in aborted:
            batch.abort(error)
            accumulator.deallocate(batch)
    log.debug("producer forgets deleted topics %s", sorted(gone | {tp.topic for tp in stale}))


def failed_for_good(producer: KafkaProducer) -> bool:
    """Whether the producer refuses every record from now on. kafka-python's idempotent
    producer takes an error the broker answers for a batch that it cannot retry (a
    record over the topic's max.message.bytes included) as fatal to itself: each later
    send fails with that error, and no public call says so."""
    # None without idempotence (and in tests' stand-ins): such a producer never is.
    manager = getattr(producer, "_transaction_manager", None)
    return manager is not None and bool(manager.has_fatal_error())


def request_metadata_update(producer: KafkaProducer) -> None:
    """Make the producer fetch the cluster's metadata now, not at metadata.max.age.ms:
    a topic grew partitions (decision 0030), and kafka-python refuses a send to one it
    has not seen. Its public partitions_for() answers from the metadata it has."""
    producer._metadata.request_update()
    producer._sender.wakeup()
