"""The server's runtime over the fakes: real `Owner`s and the real API (`Handler`), wired
as service/server.py wires them, over one FakeLog, one FakeStore and one FakeClock. No
broker, no database, no sockets: claim timeouts, GC, rebalances and adoption run in
milliseconds. The server never imports this.

Time is the FakeClock's: the owners' maintenance, their members threads, the queue
directories, the group sessions and the store shards' placement cache all read it, and
it moves when a test calls `clock.advance`, or while the test waits on something that
waits on time: `call_waiting` (an RPC that sleeps on the clock until other threads have
made progress: createQueue, a read whose barrier finds the projection behind) and
`advance_until` (an owner loop pausing after a failed pass) move it in small steps. A
node may read the wall clock off by some seconds (`rt.node(clock_skew_s=-25)`: a server
whose clock lags).

The owner threads run for real; a test waits for them with bounded polling, never by
sleeping: `settle()` returns once every record in the log is projected and each live
owner has completed a whole pass since without appending more, so ready buffers are up
to date, maintenance due at the clock's time has been done, and reads pass the API's
read barrier at once.

    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        [d] = node.enqueue("mail", job(b"x"))
        rt.settle()
        assert list(node.dequeue("mail", 1)) == [d]
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from pinledger.idl import pinlater
from pinledger.ledger import formats
from pinledger.ledger.clock import Clock
from pinledger.ledger.events import Actor
from pinledger.ledger.fake_clock import FakeClock, SkewedClock
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import LogError, catalog_topic, queue_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.api.directory import QueueDirectory
from pinledger.service.api.handler import Handler
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.ratelimit import QueueRateLimits
from pinledger.service.api.requests import Caller, DequeueRequest
from pinledger.service.config import Config
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.owner import Owner
from pinledger.service.queue_config import QueueConfig
from pinledger.service.shards.placement import Placer
from pinledger.service.shards.shard_map import Shard, ShardMap

T = TypeVar("T")

# Short timeouts, long sessions: a test that advances the clock past a claim timeout or
# a TTL does not also expire the owners' group sessions, unless it asks for short ones.
TEST_CONFIG = Config(
    kafka="fake",
    pg_dsn="fake",
    schema="fake",
    topic_prefix="rt.",
    host="127.0.0.1",
    admin_port=0,
    partitions=2,
    # Round robin: a test's jobs land in known partitions, however fast it runs.
    enqueue_sticky_ms=0,
    claim_timeout_s=30.0,
    succeeded_ttl_s=3600.0,
    failed_ttl_s=7200.0,
    gc_interval_s=60.0,
    read_wait_s=1.0,
    session_timeout_ms=86_400_000,
    # No liveness listeners: the runtime's servers share one process (decision 0039).
    liveness=False,
)
# How long (real time) a test waits for the owner threads before it fails.
WAIT_S = 10.0
# The owner loops' idle polls (real time): short, so that `settle` returns quickly.
_POLL_TIMEOUT_MS = 20
# call_waiting: how long (real time) a call may take before the clock starts moving,
# then this much fake time per millisecond of real time.
_WAITING_GRACE_S = 0.05
_WAITING_STEP_S = 0.02
# Who appends for a server that has gone away (Runtime.writer).
GONE = Actor(source="pinledger:gone", server="s0")
CALLER = pinlater.RequestContext(source="worker:runtime-test", requestId="rt")


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll `condition` (real time, bounded) until it holds; fail naming `what`. An
    unreachable fake counts as not yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except (LogError, StoreError):
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.002)


def job(
    body: bytes,
    priority: int = 1,
    run_after_ms: int | None = None,
    attempts: int | None = None,
    unique_key: str | None = None,
) -> Any:
    """A PinLaterJob as a client sends it."""
    return pinlater.PinLaterJob(
        body=body,
        priority=priority,
        runAfterTimestampMillis=run_after_ms,
        numAttemptsAllowed=attempts,
        uniqueKey=unique_key,
    )


class Node:
    """One server's runtime: writer, owner, queue directory and handler, as server.py
    assembles them (without the Thrift socket and the admin port)."""

    def __init__(self, runtime: Runtime, config: Config, clock: Clock | None = None) -> None:
        """`clock`: this server's view of the runtime's clock (a SkewedClock for one whose
        wall clock is off); the runtime's own by default."""
        self.runtime = runtime
        self.config = config
        self.clock: Clock = runtime.clock if clock is None else clock
        self.metrics = Metrics()
        self.writer = LedgerWriter(runtime.log, config.topic_prefix, config.record_limit())
        self.writer.time_appends(
            lambda seconds: self.metrics.observe(catalogue.LOG_APPEND_SECONDS, seconds)
        )
        store = runtime.ledger_store
        if runtime.shard_map is not None:
            shard_map = runtime.shard_map
            self.writer.placer = Placer(lambda: shard_map, store.queues)
        self.queues = QueueDirectory(store, clock=self.clock)
        self.rate_limits = QueueRateLimits(self.clock.monotonic)
        # The queue config file's contents, as a test sets them (`queue_config`).
        self._queue_config = QueueConfig()
        self.owner = Owner(
            config,
            store,
            runtime.log,
            self.writer,
            self.metrics,
            on_catalog_change=self.queues.refresh,
            clock=self.clock,
            on_rate_shares=self.rate_limits.set_shares,
            queue_config=lambda: self.queue_config,
            queue_rows=self.queues.rows,
        )
        self.owner.loop.poll_timeout_ms = _POLL_TIMEOUT_MS
        self.queues.on_change = self.owner.set_queues
        self.queues.on_rows = self.owner.set_rows
        self.owner.set_queues(self.queues.names())
        self.handler = Handler(
            config,
            store,
            self.writer,
            self.owner,
            self.metrics,
            self.queues,
            self.rate_limits,
            lambda: self.queue_config,
            _LocalPeers(runtime),
            self.clock,
        )
        # The schedules duty enqueues its ticks as a client would (decision 0038).
        self.owner.duties.schedules.enqueue = self.handler.enqueue_scheduled
        self.started = False
        self.stopped = False

    @property
    def queue_config(self) -> QueueConfig:
        return self._queue_config

    @queue_config.setter
    def queue_config(self, config: QueueConfig) -> None:
        """The queue config file as the server reads it: its rates apply at once."""
        self._queue_config = config
        self.rate_limits.set_rates(config.rates())

    @property
    def address(self) -> str:
        return self.config.address

    def start(self) -> None:
        self.owner.start()
        self.queues.start()
        self.started = True

    def stop(self) -> None:
        """Stop as the server does: the owner leaves the group (its partitions move at
        once) and the handler answers no peer."""
        if self.stopped:
            return
        self.stopped = True
        if self.started:
            self.owner.stop()
        self.queues.stop()

    def freeze(self) -> None:
        """Make this node a zombie: its owner thread stops polling (its group session
        runs out on the clock) while its handler still answers from what it owned."""
        self.owner.loop.stop.set()
        self.owner.loop.thread.join(timeout=WAIT_S)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Hold this node's owner thread between two passes for the block: a busy
        owner, whose projection lags the appends. Calls to the node answer as ever,
        from the buffers as they were."""
        loop = self.owner.loop
        run_pass = loop.run_pass
        parked, go = threading.Event(), threading.Event()

        def held(reader: Any) -> None:
            parked.set()
            go.wait(WAIT_S)
            run_pass(reader)

        loop.run_pass = held  # type: ignore[method-assign]
        try:
            if loop.alive:
                wait_until(parked.is_set, f"{self.address}'s owner to finish its pass")
            yield
        finally:
            del loop.run_pass
            go.set()

    @property
    def live(self) -> bool:
        return self.started and self.owner.loop.alive

    def serving(self) -> list[tuple[str, int]]:
        """The partitions this node serves now."""
        return sorted((o.queue, o.partition) for o in self.owner.partitions.serving())

    # -- PinLater calls, through the handler as a client makes them -----------------

    def enqueue(self, queue: str, *jobs: Any) -> list[str]:
        request = pinlater.PinLaterEnqueueRequest(queueName=queue, jobs=list(jobs))
        if any(getattr(j, "uniqueKey", None) is not None for j in jobs):
            # A unique job's answer waits on its projection (decision 0037), on the clock.
            keyed: list[str] = self.runtime.call_waiting(
                lambda: self.handler.enqueueJobs(CALLER, request).jobDescriptors
            )
            return keyed
        descriptors: list[str] = self.handler.enqueueJobs(CALLER, request).jobDescriptors
        return descriptors

    def dequeue(
        self,
        queue: str,
        limit: int,
        dry_run: bool = False,
        succeeded: Sequence[str] = (),
        failed: Sequence[str] = (),
    ) -> dict[str, bytes]:
        """Descriptor -> body, in the order the server answered; `succeeded` and
        `failed` are piggybacked acks."""
        acks = _ack_request(queue, succeeded, failed) if succeeded or failed else None
        request = pinlater.PinLaterDequeueRequest(
            queueName=queue, limit=limit, dryRun=dry_run, jobAckRequest=acks
        )
        jobs: dict[str, bytes] = self.handler.dequeueJobs(CALLER, request).jobs
        return jobs

    def dequeue_owned(self, queue: str, limit: int) -> dict[str, bytes]:
        """dequeueOwned, the peers' method, called as a client could call it."""
        request = pinlater.PinLaterDequeueRequest(queueName=queue, limit=limit)
        jobs: dict[str, bytes] = self.handler.dequeueOwned(CALLER, request).jobs
        return jobs

    def ack(self, queue: str, succeeded: Sequence[str] = (), failed: Sequence[str] = ()) -> None:
        self.handler.ackDequeuedJobs(CALLER, _ack_request(queue, succeeded, failed))

    def create_queue(self, name: str) -> None:
        """createQueue (with the configured partition count): it waits, the clock moving
        meanwhile, until the catalog lists the queue and owners serve it. Another node
        learns of the queue from its queue directory, which re-reads the catalog every
        second of clock time."""
        self.runtime.call_waiting(lambda: self.handler.createQueue(CALLER, name))

    def checkpoint(self, queue: str, descriptor: str) -> None:
        """A heartbeat: the claim is renewed, nothing else changes."""
        request = pinlater.PinLaterCheckpointJobsRequest(
            queueName=queue,
            requests=[pinlater.PinLaterCheckpointJobRequest(jobDescriptor=descriptor)],
        )
        self.handler.checkpointJobs(CALLER, request)

    def lookup(self, descriptor: str) -> Any:
        """The PinLaterJobInfo of a job, None when its row is gone. After `settle`, the
        read barrier lets it through at once."""
        request = pinlater.PinLaterLookupJobRequest(jobDescriptors=[descriptor])
        found = self.runtime.call_waiting(lambda: self.handler.lookupJobs(CALLER, request))
        return found.get(descriptor)

    def count(self, queue: str, state: int = pinlater.PinLaterJobState.PENDING) -> int:
        """getJobCount of a state (due jobs; after `settle`, as `lookup`)."""
        request = pinlater.PinLaterGetJobCountRequest(queueName=queue, jobState=state)
        count: int = self.runtime.call_waiting(lambda: self.handler.getJobCount(CALLER, request))
        return count

    def history(self, descriptor: str) -> Any:
        """The PinLaterJobHistory of a job (after `settle`, as `lookup`)."""
        request = pinlater.PinLaterJobHistoryRequest(jobDescriptor=descriptor)
        return self.runtime.call_waiting(lambda: self.handler.getJobHistory(CALLER, request))


class Runtime:
    """One FakeClock, FakeLog and FakeStore, and the nodes started over them. With
    `shards` above 1, a FakeStore per store shard ("a", "b", ...: `shards`), the nodes
    reading and writing them through a ShardedStore and placing new partitions on them
    (decision 0031); `store` is then the home shard's."""

    def __init__(self, config: Config = TEST_CONFIG, shards: int = 1) -> None:
        self.config = config
        self.clock = FakeClock()
        self.log = FakeLog(self.clock)
        names = [chr(ord("a") + i) for i in range(shards)]
        self.shards = {name: FakeStore() for name in names}
        self.store = self.shards[names[0]]
        self.ledger_store: LedgerStore = self.store
        self.shard_map: ShardMap | None = None
        if shards > 1:
            self.ledger_store = ShardedStore(
                config.topic_prefix, self.shards, clock=self.clock.monotonic
            )
            self.shard_map = ShardMap(tuple(Shard(n, f"postgresql://fake/{n}") for n in names))
        self.ledger_store.migrate()
        # Appends of a server that is gone (or not yet started): no owner behind it.
        self.writer = LedgerWriter(self.log, config.topic_prefix)
        self.writer.ensure_catalog(self.clock.now_ms(), GONE)
        self.nodes: list[Node] = []

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        # A test may leave a fake failing: let the owners leave cleanly.
        self.log.heal()
        for shard in self.shards.values():
            shard.recover()
        for node in self.nodes:
            node.stop()

    # -- nodes ---------------------------------------------------------------------

    def node(self, start: bool = True, clock_skew_s: float = 0.0) -> Node:
        """A new server (named s1, s2, ...), started unless `start` is False, whose wall
        clock is `clock_skew_s` off the runtime's (negative: it lags)."""
        n = len(self.nodes) + 1
        config = dataclasses.replace(self.config, server_id=f"s{n}", port=9100 + n)
        clock = SkewedClock(self.clock, clock_skew_s) if clock_skew_s else None
        node = Node(self, config, clock)
        self.nodes.append(node)
        if start:
            node.start()
        return node

    def node_at(self, address: str) -> Node:
        for node in self.nodes:
            if node.address == address and node.started and not node.stopped:
                return node
        raise ConnectionRefusedError(f"no server listens at {address}")

    # -- queues --------------------------------------------------------------------

    def create_queue(self, name: str, partitions: int) -> None:
        """Create a queue straight in the log, as a server that has gone away did: no
        owner has projected it yet."""
        self.writer.create_queue(name, partitions, self.clock.now_ms(), GONE)

    def resize_queue(self, name: str, partitions: int) -> None:
        """`pinledger queue resize`: Kafka's partitions, then the catalog's record (the
        fakes' cluster writes the newest ledger format)."""
        self.writer.follow_format(formats.LATEST)
        self.writer.resize_queue(name, partitions, self.clock.now_ms(), GONE, "a test")

    def call_waiting(self, call: Callable[[], T], timeout_s: float = WAIT_S) -> T:
        """Run `call`; once it has not returned for a moment, move the clock in small
        steps until it does: for RPCs that wait on the clock for other threads' progress
        (createQueue; a read whose barrier finds the projection behind)."""
        result: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                result.append(call())
            except BaseException as exc:  # re-raised on the test's thread
                failure.append(exc)

        thread = threading.Thread(target=run, name="call-waiting", daemon=True)
        thread.start()
        thread.join(_WAITING_GRACE_S)
        deadline = time.monotonic() + timeout_s
        while thread.is_alive():
            if time.monotonic() >= deadline:
                raise AssertionError(f"a call did not return within {timeout_s:.0f} s")
            self.clock.advance(_WAITING_STEP_S)
            thread.join(0.001)
        if failure:
            raise failure[0]
        return result[0]

    # -- waiting for the owner threads ---------------------------------------------

    def topics(self) -> list[str]:
        prefix = self.config.topic_prefix
        return sorted(t for t in self.log.topics() if t.startswith(prefix))

    def ends(self) -> dict[tuple[str, int], int]:
        """The end offset of every partition in the log."""
        keys = [
            (topic, p)
            for topic in self.topics()
            for p in range(self.log.partition_count(topic) or 0)
        ]
        return self.log.end_offsets(keys)

    def projected(self) -> bool:
        """Whether every record in the log is projected into the store: the catalog's,
        and those of the queues it lists (a deleted queue's topic, until it is gone, is
        never projected again)."""
        ends = self.ends()
        listed = {catalog_topic(self.config.topic_prefix)} | {
            queue_topic(self.config.topic_prefix, row.name) for row in self.ledger_store.queues()
        }
        ends = {key: end for key, end in ends.items() if key[0] in listed}
        reached = self.ledger_store.offsets(list(ends))
        return all(reached.get(key, 0) >= end for key, end in ends.items())

    def settle(self, timeout_s: float = WAIT_S) -> None:
        """Wait until the runtime is quiet: every record in the log projected, and a whole
        pass of each live owner begun since, without appending more (the pass that
        committed the last batch has then told its ready buffers; maintenance that came
        due by the clock's time has been appended and projected)."""

        def quiet() -> bool:
            wait_until(self.projected, "the projection to reach the end of the log", timeout_s)
            ends = self.ends()
            self.wait_passes(2, timeout_s)
            return self.ends() == ends and self.projected()

        wait_until(quiet, "the owners to go quiet", timeout_s)

    def wait_passes(self, passes: int = 2, timeout_s: float = WAIT_S) -> None:
        """Wait until each live owner has completed `passes` more passes of its loop
        (the first may have begun before this call; the second began after)."""
        live = [node for node in self.nodes if node.live]
        start = {id(node): node.owner.loop.passes for node in live}
        wait_until(
            lambda: all(
                node.owner.loop.passes >= start[id(node)] + passes or not node.live for node in live
            ),
            f"{passes} passes of the owner loops",
            timeout_s,
        )

    def advance_until(
        self,
        condition: Callable[[], bool],
        what: str,
        step_s: float = 0.1,
        timeout_s: float = WAIT_S,
    ) -> None:
        """Move the clock by `step_s` at a time until `condition` holds: for what waits
        on time passing (an owner loop pausing after a failed pass)."""

        def stepped() -> bool:
            done = False
            try:
                done = condition()
            finally:
                if not done:
                    self.clock.advance(step_s)
            return done

        wait_until(stepped, what, timeout_s)

    def wait_serving(self, queue: str, partitions: int, nodes: Iterable[Node]) -> None:
        """Wait until the given nodes together serve every partition of `queue`."""
        wanted = {(queue, p) for p in range(partitions)}
        members = list(nodes)
        wait_until(
            lambda: wanted <= {key for node in members for key in node.serving()},
            f"every partition of {queue} to be served by {[n.address for n in members]}",
        )


def _ack_request(queue: str, succeeded: Sequence[str], failed: Sequence[str]) -> Any:
    return pinlater.PinLaterJobAckRequest(
        queueName=queue,
        jobsSucceeded=[pinlater.PinLaterJobAckInfo(jobDescriptor=d) for d in succeeded],
        jobsFailed=[pinlater.PinLaterJobAckInfo(jobDescriptor=d) for d in failed],
    )


class _LocalPeers(PeerPool):
    """Forwards a dequeue to the peer node's handler in this process, as PeerPool
    forwards it over Thrift; a stopped node refuses."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self._runtime = runtime

    def dequeue(
        self,
        address: str,
        caller: Caller | None,
        request: DequeueRequest,
        limit: int,
        gone: Callable[[], bool] | None = None,
    ) -> Any:
        """In-process calls do not hang: `gone` is never needed."""
        node = self._runtime.node_at(address)
        context = (
            None
            if caller is None
            else pinlater.RequestContext(source=caller.source, requestId=caller.request_id)
        )
        forwarded = pinlater.PinLaterDequeueRequest(
            queueName=request.queue, limit=limit, dryRun=request.dry_run, coverage=request.coverage
        )
        return node.handler.dequeueOwned(context, forwarded)
