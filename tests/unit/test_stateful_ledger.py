"""A stateful property test of the whole server on the fakes (issue 38): hypothesis drives
workers, operators, servers and faults against real Owners and the real handler over
FakeLog, two FakeStore shards and a FakeClock, and after every step checks what a user
can know:

- no acknowledged job is lost: every enqueue answered with descriptors names its job in
  the store, until a recorded action removed it (a deleteJobs of the state it was in, a
  collection past its TTL) or its queue was deleted;
- a queue deleted and created again never holds, nor hands out, the old queue's jobs;
- no job has two live claims: a job is handed out again only once the claim it was
  handed out under has ended (acked, moved to pending, timed out), every claim a
  dequeue answered is the job's current claim, and a claim renewed within the timeout
  does not time out;
- a success ack answered OK from the worker holding the claim makes the job SUCCEEDED;
  a stale ack or checkpoint changes nothing;
- replay equals the live tables: the log folded again (the verify of `pinledger
  replay`, and a rebuild into a fresh store) gives the live jobs and timelines.

The model (`Model`) is what users know: the descriptors their enqueues were answered
with, the jobs their dequeues were answered with, the acks answered OK. Every step ends
with the runtime quiet (`rt.settle`), so the checks read a store that has projected the
whole log. The run is bounded for `make test` (a few dozen seconds) and derandomized,
so every run tries the same sequences; PINLEDGER_STATEFUL_EXAMPLES=<n> tries n random
ones instead, for a longer search.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pinledger.idl import pinlater
from pinledger.ledger import formats
from pinledger.ledger.descriptor import parse
from pinledger.ledger.log import LogError, queue_topic
from pinledger.ledger.state import Job, JobState
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import ProjectionRunner, Scope
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.store import EventRow, QueueRow
from pinledger.projections.verify import verify
from pinledger.service.security.password import hash_password
from pinledger.service.shards.moves import Mover, MoveRefusedError
from pinledger.service.testing.runtime import (
    GONE,
    TEST_CONFIG,
    WAIT_S,
    Node,
    Runtime,
    wait_until,
)
from pinledger.service.testing.runtime import job as new_job
from tests.unit.held_log import HeldLog

# Reporting a failing example, hypothesis's pytest plugin imports its patch writer and
# with it libcst where installed; libcst 1.0 warns on import (mypy_extensions.TypedDict),
# which filterwarnings = error turns into a pytest INTERNALERROR hiding the failure.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

QUEUE = "mail"
PASSWORD = "stateful"
SESSION_S = 10.0
CLAIM_TIMEOUT_S = 30.0
# Short enough that collections happen within an example.
SUCCEEDED_TTL_S = 90.0
FAILED_TTL_S = 120.0
CONFIG = dataclasses.replace(
    TEST_CONFIG,
    partitions=2,
    claim_timeout_s=CLAIM_TIMEOUT_S,
    succeeded_ttl_s=SUCCEEDED_TTL_S,
    failed_ttl_s=FAILED_TTL_S,
    gc_interval_s=10.0,
    # A killed server's partitions move once the clock has passed its session.
    session_timeout_ms=int(SESSION_S * 1000),
    admin_salt="s",
    admin_password_sha256=hash_password(PASSWORD, "s"),
)
PREFIX = CONFIG.topic_prefix
TOPIC = queue_topic(PREFIX, QUEUE)
SHARDS = ("a", "b")
MAX_SERVERS = 4
# The clock moves at most this much at once, every live owner polling in between: a
# live server's session never runs out.
CLOCK_STEP_S = 8.0
# The owners' idle polls (real time): settling takes two of them.
POLL_MS = 5
# An operator's call that waits on the clock (createQueue, deleteJobs, ...) takes this
# much of it, however long it took in real time: the same sequence of steps then moves
# the clock the same way however busy the machine is.
OPERATOR_CALL_S = 5.0
# After servers or partitions change, the clock moves this much in small steps: the
# queue directories (every second) and the members threads (every two) catch up.
STEADY_S = 3.0
# How long (real time) a command line tool may take before it counts as stuck.
TOOL_S = 20.0
# An append of a call fails: written but answered with an error, or refused certainly.
FAULTS = (None, "lost", "refused")
# What an operator does, each kind as likely: bulk calls at a priority, the queue
# deleted and created again, resized, a partition moved to a store shard, the retention
# removing a partition's records so far.
OPERATIONS = st.one_of(
    st.sampled_from([f"retryFailedJobs p{p}" for p in (1, 2)]),
    st.sampled_from(
        [f"deleteJobs {s} p{p}" for s in ("PENDING", "FAILED", "SUCCEEDED") for p in (1, 2)]
    ),
    st.just("recreate"),
    st.sampled_from([f"resize {n}" for n in (1, 2, 3)]),
    st.sampled_from([f"move {p} to {shard}" for p in (0, 1, 2) for shard in SHARDS]),
    st.sampled_from([f"retention {p}" for p in (0, 1, 2)]),
)
# A server's wall clock may be off: by as much as this, a claim heartbeated through it
# looks older (or younger) than it is.
SKEWS = {"start": 0.0, "start lagging 25 s": -25.0, "start leading 25 s": 25.0}
SERVER_ACTIONS = (*SKEWS, "stop", "kill", "stop while claiming")
OPERATOR = pinlater.RequestContext(source="ops:stateful", requestId="op")
# The applied events that may end a worker's claim, other than its own acks.
TIMED_OUT = "tmo"


class BrokenPromiseError(AssertionError):
    """Something a user relies on does not hold."""


@dataclass
class Handout:
    """A job a dequeue answered to a worker: what the worker believes it holds."""

    body: bytes
    descriptor: str
    worker: str
    # When the worker got it or last heartbeated it (the runtime's clock, ms).
    renewed_ms: int
    # False once the claim has ended: acked or moved back by the worker (answered OK),
    # or the store shows the job no longer held under it.
    live: bool = True


@dataclass
class Model:
    """What the users of one incarnation of the queue know."""

    incarnation: int
    # Body -> descriptor of every job an enqueue was answered for.
    acknowledged: dict[bytes, str] = field(default_factory=dict)
    # Bodies of enqueues that failed: in the log or not.
    attempted: set[bytes] = field(default_factory=set)
    handouts: list[Handout] = field(default_factory=list)
    # Jobs a success ack from the claim's holder was answered OK for.
    succeeded: set[bytes] = field(default_factory=set)
    # Partitions whose log lost records to the retention: not rebuilt from the log.
    truncated: set[int] = field(default_factory=set)

    def live_holders(self, body: bytes) -> list[Handout]:
        return [h for h in self.handouts if h.body == body and h.live]


Jobs = dict[bytes, tuple[int, Job]]


def _context(source: str) -> Any:
    return pinlater.RequestContext(source=source, requestId=source)


def _incarnation_of(body: bytes) -> int:
    return int(body.split(b"-")[0][1:])


def _state(value: int | None) -> str:
    return "?" if value is None else JobState(value).name


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rt = Runtime(CONFIG, shards=len(SHARDS))
        self.rt.writer.follow_format(formats.LATEST)
        self.live: list[Node] = []
        self.killed: list[Node] = []
        self.model = Model(incarnation=0)
        self.serial = 0
        # deleteJobs callers -> the state they asked for.
        self.deletes: dict[str, JobState] = {}
        # The last step's handouts, and what it expects of the store once quiet.
        self.fresh: list[Handout] = []
        self.expect: list[Callable[[Jobs], None]] = []
        self._start(0.0).create_queue(QUEUE)
        self._start(0.0)
        self._steady()

    # -- the runtime ------------------------------------------------------------------

    def _start(self, skew: float) -> Node:
        node = self.rt.node(clock_skew_s=skew)
        node.owner.loop.poll_timeout_ms = POLL_MS
        self.live.append(node)
        return node

    def teardown(self) -> None:
        try:
            if sys.exc_info()[1] is None:  # a failing step reports its own failure
                self._quiet()
                self._replay_equals_live()
        finally:
            self.rt.log.heal()
            stopping = [threading.Thread(target=n.stop) for n in self.live]
            stopping += [threading.Thread(target=n.owner.stop) for n in self.killed]
            for thread in stopping:
                thread.start()
            for thread in stopping:
                thread.join(15)

    def _advance(self, seconds: float, step_s: float = CLOCK_STEP_S) -> None:
        """Move the clock, a few seconds at a time, the runtime quiet between."""
        left = seconds
        while left > 0:
            step = min(step_s, left)
            self.rt.clock.advance(step)
            left -= step
            self._quiet()

    def _quiet(self) -> None:
        """Wait until every record is projected and the owners are quiet. An owner that
        failed a pass backs off on the clock, which then moves in small steps."""
        try:
            self.rt.settle(timeout_s=5.0)
            return
        except AssertionError:
            pass

        def settled() -> bool:
            try:
                self.rt.settle(timeout_s=0.5)
            except AssertionError:
                return False
            return True

        self.rt.advance_until(settled, "the runtime to go quiet", step_s=0.5, timeout_s=30.0)

    def _steady(self) -> None:
        """After servers or partitions change: the clock moves STEADY_S in small steps
        (queue directories, members ticks and placement caches catch up), then every
        partition is served from the shard it is placed on, each server's queue
        directory has the queue as the catalog does, and each knows which others serve
        it (what a dequeue is topped up from)."""
        self._advance(STEADY_S, 1.0)
        for _ in range(10):
            try:
                wait_until(self._is_steady, "the servers to agree on the queue", 2.0)
                return
            except AssertionError:
                self._advance(1.0, 0.5)  # slow: a rebalance came after a tick
        wait_until(self._is_steady, "the servers to agree on the queue", 1.0)

    def _is_steady(self) -> bool:
        row = self._row()
        served = [key for node in self.live for key in _served_by(node)]
        placed = [(p, row.shard_of(p) or SHARDS[0]) for p in range(row.partitions)]
        if sorted(served) != placed:
            return False
        working = range(row.partitions if row.retired_from is None else row.retired_from)
        for node in self.live:
            if node.queues.get(QUEUE) != row:
                return False
            others = {
                other.address
                for other in self.live
                if other is not node and any(p in working for p, _ in _served_by(other))
            }
            if set(node.owner.peers_for(QUEUE)) != others:
                return False
        return True

    def _row(self) -> QueueRow:
        found = [r for r in self.rt.store.queues() if r.name == QUEUE]
        if not found:
            raise BrokenPromiseError(f"createQueue({QUEUE!r}) answered OK; the queue is not there")
        return found[0]

    def _shard(self, partition: int) -> FakeStore:
        return self.rt.shards[self._row().shard_of(partition) or SHARDS[0]]

    def _jobs(self) -> Jobs:
        """The queue's jobs as users see them (each partition's on the shard it is
        placed on), by body: a body is enqueued once."""
        found: Jobs = {}
        for partition in range(self._row().partitions):
            for job in self._shard(partition).partition_jobs(QUEUE, partition).values():
                if job.body in found:
                    raise BrokenPromiseError(
                        f"two jobs hold {job.body!r}: an enqueue written twice"
                    )
                found[job.body] = (partition, job)
        return found

    def _timeline(self, descriptor: str) -> list[EventRow]:
        """The job's applied events."""
        parsed = parse(descriptor)
        if parsed.partition >= self._row().partitions:
            return []
        rows = self._shard(parsed.partition).job_events(QUEUE, parsed.partition, parsed.local_id)
        return [row for row in rows if row.applied]

    def _node(self, index: int) -> Node:
        return self.live[index % len(self.live)]

    @contextmanager
    def _fault(self, fault: str | None) -> Iterator[None]:
        """The call's appends: the first written but answered with an error (its
        acknowledgement lost), or all refused before sending (certainly not written)."""
        if fault == "lost":
            self.rt.log.lose_answers(1)
        elif fault == "refused":
            self.rt.log.fail("refused before sending", operations=["append"], certain=True)
        try:
            yield
        finally:
            self.rt.log.heal()

    def _operator_call(self, call: Callable[[], object]) -> None:
        """A call that waits on the clock (createQueue, deleteJobs, ...): it takes
        OPERATOR_CALL_S of the clock however long it took in real time."""
        until = self.rt.clock.monotonic() + OPERATOR_CALL_S
        try:
            self.rt.call_waiting(call)
        finally:
            self._quiet()
            self._advance(until - self.rt.clock.monotonic(), 1.0)

    # -- workers ----------------------------------------------------------------------

    @initialize(jobs=st.integers(1, 6))
    def some_jobs(self, jobs: int) -> None:
        """The queue has a few jobs to begin with, one enqueue each (round robin over
        the partitions)."""
        for _ in range(jobs):
            self.enqueue(0, [(0, 2, 1)], None)

    @rule(
        node=st.integers(0, 3),
        jobs=st.lists(
            st.tuples(st.sampled_from([0, 0, 5, 45]), st.integers(1, 3), st.integers(1, 2)),
            min_size=1,
            max_size=3,
        ),
        fault=st.sampled_from(FAULTS),
    )
    def enqueue(self, node: int, jobs: list[tuple[int, int, int]], fault: str | None) -> None:
        """Jobs as (delay s, attempts, priority)."""
        now = self.rt.clock.now_ms()
        bodies, made = [], []
        for delay_s, attempts, priority in jobs:
            self.serial += 1
            body = b"i%d-j%d" % (self.model.incarnation, self.serial)
            run_after = now + delay_s * 1000 if delay_s else None
            bodies.append(body)
            made.append(new_job(body, priority=priority, run_after_ms=run_after, attempts=attempts))
        try:
            with self._fault(fault):
                descriptors = self._node(node).enqueue(QUEUE, *made)
        except pinlater.PinLaterException:
            self.model.attempted.update(bodies)
            return
        assert len(descriptors) == len(bodies)
        self.model.acknowledged.update(zip(bodies, descriptors, strict=True))

    @rule(
        workers=st.lists(
            st.tuples(st.integers(0, 3), st.integers(1, 4), st.sampled_from(FAULTS)),
            min_size=1,
            max_size=3,
        )
    )
    def dequeue(self, workers: list[tuple[int, int, str | None]]) -> None:
        """Workers dequeue as (server, limit, fault) at once: one right after another,
        the owners busy meanwhile (nothing projected between the calls)."""
        with ExitStack() as busy:
            for server in self.live:
                busy.enter_context(server.busy())
            for node, limit, fault in workers:
                with self._fault(fault):
                    self._dequeue(self._node(node), limit)

    def _dequeue(self, node: Node, limit: int) -> None:
        self.serial += 1
        worker = f"worker:w{self.serial}"
        request = pinlater.PinLaterDequeueRequest(queueName=QUEUE, limit=limit)
        try:
            got = node.handler.dequeueJobs(_context(worker), request).jobs
        except pinlater.PinLaterException:
            return  # the worker was told no job is its
        self._handed(worker, got)

    def _handed(self, worker: str, got: dict[str, bytes]) -> None:
        now = self.rt.clock.now_ms()
        for descriptor, body in got.items():
            if _incarnation_of(body) != self.model.incarnation:
                raise BrokenPromiseError(
                    f"{worker} was handed {descriptor} ({body!r}) of a queue {QUEUE} deleted "
                    f"since (this is incarnation {self.model.incarnation})"
                )
            for holder in self.model.live_holders(body):
                raise BrokenPromiseError(
                    f"{descriptor} ({body!r}) handed to {worker} while {holder.worker}'s "
                    "claim on it is live"
                )
            handout = Handout(body, descriptor, worker, now)
            self.model.handouts.append(handout)
            self.fresh.append(handout)

    def _handout(self, pick: int, live: bool) -> Handout | None:
        held = [h for h in self.model.handouts if h.live == live]
        if not live:
            # A stale claim on a job another worker now holds is the one that must not
            # act: picked whenever there is one.
            taken = [h for h in held if self.model.live_holders(h.body)]
            held = taken or held
        return held[pick % len(held)] if held else None

    @rule(
        node=st.integers(0, 3),
        pick=st.integers(0, 50),
        success=st.booleans(),
        stale=st.booleans(),
        fault=st.sampled_from(FAULTS),
    )
    def ack(self, node: int, pick: int, success: bool, stale: bool, fault: str | None) -> None:
        """A worker acks a job it holds, or (stale) one whose claim has ended: timed
        out, acked already, or of a queue deleted since."""
        handout = self._handout(pick, live=not stale)
        if handout is None:
            return
        info = [pinlater.PinLaterJobAckInfo(jobDescriptor=handout.descriptor)]
        request = pinlater.PinLaterJobAckRequest(
            queueName=QUEUE,
            jobsSucceeded=info if success else [],
            jobsFailed=[] if success else info,
        )
        handler = self._node(node).handler
        context = _context(handout.worker)
        answered = self._call(
            handout, stale, fault, lambda: handler.ackDequeuedJobs(context, request)
        )
        if not answered or stale:
            return
        if success:
            self.model.succeeded.add(handout.body)
            return

        def released(jobs: Jobs) -> None:
            found = jobs.get(handout.body)
            if found is not None and found[1].state not in (JobState.PENDING, JobState.FAILED):
                raise BrokenPromiseError(
                    f"{handout.worker}'s failure ack of {handout.descriptor} was answered OK, "
                    f"yet the job is {found[1].state.name} under {found[1].claim_source}"
                )

        self.expect.append(released)

    @rule(
        node=st.integers(0, 3),
        pick=st.integers(0, 50),
        to_pending=st.booleans(),
        stale=st.booleans(),
        fault=st.sampled_from(FAULTS),
    )
    def checkpoint(
        self, node: int, pick: int, to_pending: bool, stale: bool, fault: str | None
    ) -> None:
        """A heartbeat, or a move back to pending, of a job the worker holds or (stale)
        held."""
        handout = self._handout(pick, live=not stale)
        if handout is None:
            return
        request = pinlater.PinLaterCheckpointJobsRequest(
            queueName=QUEUE,
            requests=[
                pinlater.PinLaterCheckpointJobRequest(
                    jobDescriptor=handout.descriptor, moveToPending=to_pending
                )
            ],
        )
        handler = self._node(node).handler
        context = _context(handout.worker)
        answered = self._call(
            handout, stale, fault, lambda: handler.checkpointJobs(context, request)
        )
        if answered and not stale and not to_pending:
            handout.live = True
            handout.renewed_ms = self.rt.clock.now_ms()

    def _call(
        self, handout: Handout, stale: bool, fault: str | None, call: Callable[[], None]
    ) -> bool:
        """An ack or checkpoint of `handout`; whether it was answered OK. Answered OK, the
        worker's claim has ended (a heartbeat's caller sets it live again); a stale one
        must change nothing."""
        before = _seen(self._jobs()) if stale else {}
        try:
            with self._fault(fault):
                call()
        except pinlater.PinLaterException:
            return False  # maybe applied: the store tells
        handout.live = False
        if not stale:
            return True

        def unchanged(jobs: Jobs) -> None:
            after = _seen(jobs)
            changed = {b: (before.get(b), s) for b, s in after.items() if before.get(b) != s}
            if changed:
                raise BrokenPromiseError(
                    f"a stale ack or checkpoint of {handout.descriptor} by {handout.worker} "
                    f"changed jobs: {changed}"
                )

        self.expect.append(unchanged)
        return True

    # -- operators --------------------------------------------------------------------

    @rule(action=OPERATIONS, node=st.integers(0, 3), fault=st.sampled_from(FAULTS))
    def operate(self, action: str, node: int, fault: str | None) -> None:
        """An operator's action (through server `node` where it is a call; its first
        append maybe failing): see OPERATIONS."""
        verb, _, rest = action.partition(" ")
        handler = self._node(node).handler
        if verb == "retryFailedJobs":
            priority = int(rest[1:])
            request: Any = pinlater.PinLaterRetryFailedJobsRequest(
                queueName=QUEUE, priority=priority
            )
            self._bulk(lambda c: handler.retryFailedJobs(c, request), None, fault)
        elif verb == "deleteJobs":
            state, at = rest.split(" ")
            asked = JobState[state]
            request = pinlater.PinLaterDeleteJobsRequest(
                queueName=QUEUE, jobState=int(asked), priority=int(at[1:])
            )
            self._bulk(lambda c: handler.deleteJobs(c, request), asked, fault)
        elif verb == "recreate":
            self._recreate(handler, fault)
        elif verb == "resize":
            partitions = int(rest)
            self._operator(lambda: self.rt.resize_queue(QUEUE, partitions), fault)
            self._steady()
        elif verb == "move":
            partition, _, shard = rest.partition(" to ")
            self._move(int(partition), shard, fault)
        else:
            assert verb == "retention", action
            self._retention(int(rest))

    def _bulk(
        self, call: Callable[[Any], object], delete: JobState | None, fault: str | None
    ) -> None:
        """deleteJobs (of the state asked for) or retryFailedJobs, as its own caller."""
        self.serial += 1
        source = f"ops:bulk-{self.serial}"
        if delete is not None:
            self.deletes[source] = delete

        def bulk() -> None:
            with self._fault(fault):
                call(_context(source))

        with suppress(pinlater.PinLaterException):
            self._operator_call(bulk)

    def _recreate(self, handler: Any, fault: str | None) -> None:
        """deleteQueue, then createQueue under the same name; the operator calls each
        again until it is answered OK."""
        self._until_ok(lambda: handler.deleteQueue(OPERATOR, QUEUE, PASSWORD), fault)
        old = self.model
        self.model = Model(incarnation=old.incarnation + 1)
        # The old queue's workers keep their descriptors: acking them is stale.
        self.model.handouts = [dataclasses.replace(h, live=False) for h in old.handouts]
        self._until_ok(lambda: handler.createQueue(OPERATOR, QUEUE), fault)
        self._steady()

    def _until_ok(self, call: Callable[[], object], fault: str | None) -> None:
        for attempt in range(5):
            try:
                with self._fault(fault if attempt == 0 else None):
                    self._operator_call(call)
                return
            except pinlater.PinLaterException:
                pass
        raise AssertionError("an operator's call failed five times")

    def _operator(self, command: Callable[[], object], fault: str | None) -> None:
        """A command line tool, run again when it fails for want of Kafka; one that does
        not end within TOOL_S (real time) is stuck."""
        for attempt in range(3):
            try:
                with self._fault(fault if attempt == 0 else None):
                    _within(TOOL_S, command)
                return
            except LogError:
                self._quiet()
        _within(TOOL_S, command)

    def _move(self, partition: int, shard: str, fault: str | None) -> None:
        """`pinledger move-partition`: refused only when the partition's log lost
        records to the retention (moved all the same, the checks of the jobs tell
        whether that lost any)."""
        row = self._row()
        if partition >= row.partitions:
            return
        store = self.rt.ledger_store
        assert isinstance(store, ShardedStore) and self.rt.shard_map is not None
        mover = Mover(store, self.rt.log, self.rt.writer, self.rt.shard_map, GONE, _unread, 0)
        moving = (row.shard_of(partition) or SHARDS[0]) != shard
        truncated = partition in self.model.truncated
        try:
            self._operator(lambda: mover.move(QUEUE, partition, shard, self.rt.clock.now_ms), fault)
        except MoveRefusedError as refused:
            if moving and truncated:
                return
            raise BrokenPromiseError(
                f"{QUEUE}[{partition}] to {shard!r} refused: {refused}"
            ) from None
        self._steady()

    def _retention(self, partition: int) -> None:
        """The topic's retention removes the partition's records but the newest."""
        if partition >= self._row().partitions:
            return
        end = self.rt.log.end_offsets([(TOPIC, partition)])[(TOPIC, partition)]
        if end > 1:
            self.rt.log.remove_records_before(TOPIC, partition, end - 1)
            self.model.truncated.add(partition)

    # -- servers and time -------------------------------------------------------------

    @rule(action=st.sampled_from(SERVER_ACTIONS), node=st.integers(0, 3))
    def server(self, action: str, node: int) -> None:
        """A server starts (its wall clock maybe 25 s off), stops, is killed (it answers
        nothing more, and its partitions move once its session runs out), or stops
        while a dequeue on it is appending its claim and a worker dequeues from the
        next server meanwhile. One server always runs."""
        if action.startswith("start"):
            if len(self.live) >= MAX_SERVERS:
                return
            self._start(SKEWS[action])
        else:
            if len(self.live) < 2:
                return
            chosen = self._node(node)
            other = self._node(node + 1)
            self.live.remove(chosen)
            if action == "stop":
                chosen.stop()
            elif action == "kill":
                self.killed.append(chosen)
                chosen.freeze()
                self._advance(SESSION_S + 1)
            else:
                self._stop_while_claiming(chosen, other)
        self._steady()

    def _stop_while_claiming(self, stopping: Node, other: Node) -> None:
        held = HeldLog(stopping.writer.group.log)
        stopping.writer.group.log = held
        self.serial += 1
        worker = f"worker:w{self.serial}"
        got: dict[str, bytes] = {}

        def claim() -> None:
            request = pinlater.PinLaterDequeueRequest(queueName=QUEUE, limit=2)
            with suppress(pinlater.PinLaterException):
                got.update(stopping.handler.dequeueJobs(_context(worker), request).jobs)

        claiming = threading.Thread(target=claim, daemon=True)
        claiming.start()
        wait_until(
            lambda: held.entered.is_set() or not claiming.is_alive(), "the dequeue to append"
        )
        stopping_thread = threading.Thread(target=stopping.stop, daemon=True)
        stopping_thread.start()
        if held.entered.is_set():
            # Had the server left the group now, `other` would serve its partitions.
            time.sleep(0.1)
            self._dequeue(other, 4)
        held.release.set()
        claiming.join(10)
        stopping_thread.join(10)
        assert not claiming.is_alive() and not stopping_thread.is_alive()
        self._handed(worker, got)

    @rule(
        seconds=st.sampled_from([1.0, 5.0, 12.0, 31.0, 31.0, 100.0]),
        heartbeats=st.none() | st.integers(0, 3),
    )
    def advance_clock(self, seconds: float, heartbeats: int | None) -> None:
        """Time passes; the workers holding jobs heartbeat each of them through server
        `heartbeats` every third of the claim timeout meanwhile, or (None) not."""
        left = seconds
        while left > 0:
            if heartbeats is not None:
                self._heartbeat_all(self._node(heartbeats))
            step = min(left, CLAIM_TIMEOUT_S / 3)
            self._advance(step)
            left -= step
        self._steady()  # partitions may have retired meanwhile

    def _heartbeat_all(self, node: Node) -> None:
        for handout in [h for h in self.model.handouts if h.live]:
            request = pinlater.PinLaterCheckpointJobsRequest(
                queueName=QUEUE,
                requests=[pinlater.PinLaterCheckpointJobRequest(jobDescriptor=handout.descriptor)],
            )
            with suppress(pinlater.PinLaterException):
                node.handler.checkpointJobs(_context(handout.worker), request)
                handout.renewed_ms = self.rt.clock.now_ms()

    # -- the invariants ---------------------------------------------------------------

    @invariant()
    def what_users_know_holds(self) -> None:
        self._quiet()
        jobs = self._jobs()
        self._no_job_of_another_incarnation_nor_of_nobody(jobs)
        self._no_acknowledged_job_lost(jobs)
        self._claims_are_single_and_end_by_rule(jobs)
        for body in self.model.succeeded:
            found = jobs.get(body)
            if found is not None and found[1].state is not JobState.SUCCEEDED:
                raise BrokenPromiseError(
                    f"{self.model.acknowledged.get(body)} was acked successfully by its "
                    f"claim's holder (answered OK), yet it is {found[1].state.name}"
                )
        expect, self.expect = self.expect, []
        for check in expect:
            check(jobs)
        self._replay_equals_live()

    def _no_job_of_another_incarnation_nor_of_nobody(self, jobs: Jobs) -> None:
        for body in jobs:
            if _incarnation_of(body) != self.model.incarnation:
                raise BrokenPromiseError(
                    f"{body!r}, of a queue {QUEUE} deleted since, is in the store "
                    f"(incarnation {self.model.incarnation})"
                )
            if body not in self.model.acknowledged and body not in self.model.attempted:
                raise BrokenPromiseError(f"{body!r} is in the store, but nobody enqueued it")

    def _no_acknowledged_job_lost(self, jobs: Jobs) -> None:
        by_place = {(p, job.local_id): job for p, job in jobs.values()}
        for body, descriptor in self.model.acknowledged.items():
            parsed = parse(descriptor)
            job = by_place.get((parsed.partition, parsed.local_id))
            if job is None:
                self._gone_by_a_recorded_action(descriptor, body)
            elif job.body != body:
                raise BrokenPromiseError(
                    f"{descriptor} names {job.body!r}, not the {body!r} enqueued"
                )

    def _gone_by_a_recorded_action(self, descriptor: str, body: bytes) -> None:
        """An acknowledged job not in the store: its timeline must end with a delete in
        the state the operator asked for, or a collection past its TTL."""
        applied = self._timeline(descriptor)
        if len(applied) < 2:
            raise BrokenPromiseError(f"{descriptor} ({body!r}) was acknowledged and is gone: lost")
        last, before = applied[-1], applied[-2]
        if last.type == "gc":
            ttl = {JobState.SUCCEEDED: SUCCEEDED_TTL_S, JobState.FAILED: FAILED_TTL_S}
            kept = None if before.state_after is None else ttl.get(JobState(before.state_after))
            if kept is None or last.at - before.at < kept * 1000:
                raise BrokenPromiseError(
                    f"{descriptor} collected {(last.at - before.at) / 1000:.0f} s after it "
                    f"became {_state(before.state_after)}"
                )
            return
        if last.type == "del":
            asked = self.deletes.get(last.source)
            if asked is None or before.state_after != asked:
                raise BrokenPromiseError(
                    f"{descriptor} deleted by {last.source}, which asked for "
                    f"{asked.name if asked else 'nothing'}, while it was "
                    f"{_state(before.state_after)}"
                )
            return
        raise BrokenPromiseError(
            f"{descriptor} ({body!r}) is gone; its last event was {last.type!r}"
        )

    def _claims_are_single_and_end_by_rule(self, jobs: Jobs) -> None:
        for handout in self.fresh:
            found = jobs.get(handout.body)
            if found is None or not _held_by(found[1], handout.worker):
                shown = (
                    "gone"
                    if found is None
                    else f"{found[1].state.name} under {found[1].claim_source}"
                )
                raise BrokenPromiseError(
                    f"a dequeue answered {handout.worker} with {handout.descriptor}, but the "
                    f"job is {shown}: the claim it was handed out under is not the job's"
                )
        self.fresh.clear()
        now = self.rt.clock.now_ms()
        for handout in self.model.handouts:
            found = jobs.get(handout.body)
            if not handout.live or (found is not None and _held_by(found[1], handout.worker)):
                continue
            handout.live = False
            if found is None:
                continue  # the acknowledged jobs' check says whether it may be gone
            # What ended it: the worker's own ack or checkpoint (its answer lost), or a
            # timeout past its last renewal.
            ended = self._timeline(handout.descriptor)[-1]
            if ended.source == handout.worker:
                continue
            if ended.type != TIMED_OUT:
                raise BrokenPromiseError(
                    f"{handout.worker}'s live claim on {handout.descriptor} ended by "
                    f"{ended.type!r} from {ended.source}"
                )
            if now - handout.renewed_ms < CLAIM_TIMEOUT_S * 1000:
                raise BrokenPromiseError(
                    f"{handout.worker}'s claim on {handout.descriptor}, renewed "
                    f"{(now - handout.renewed_ms) / 1000:.0f} s ago, timed out"
                )

    def _replay_equals_live(self) -> None:
        """The log folded again equals the live tables: the verify `pinledger replay`
        runs, and a rebuild into a fresh store. Partitions whose log lost records to the
        retention cannot be rebuilt: left out."""
        whole = [p for p in range(self._row().partitions) if p not in self.model.truncated]
        for partition in whole:
            scope = Scope(queues=frozenset({QUEUE}), partition=partition)
            report = verify(self.rt.ledger_store, self.rt.log, PREFIX, scope)
            if not report.identical:
                raise BrokenPromiseError(
                    f"the verify of {QUEUE}[{partition}] differs: {report.diffs}"
                )
        scratch = FakeStore("rebuilt")
        scratch.migrate()
        only = frozenset((QUEUE, p) for p in whole)
        runner = ProjectionRunner(scratch, self.rt.log, PREFIX, Scope(only=only))
        try:
            # catch_up's polls wait 200 ms for records that never come at the end.
            deadline = time.monotonic() + WAIT_S
            runner.step(timeout_ms=5)
            while runner.lag():
                assert time.monotonic() < deadline, f"the rebuild is stuck: {runner.lag()}"
                runner.step(timeout_ms=5)
        finally:
            runner.close()
        for partition in whole:
            live = self._shard(partition).partition_jobs(QUEUE, partition)
            rebuilt = scratch.partition_jobs(QUEUE, partition)
            if live != rebuilt:
                differ = {
                    i: (live.get(i), rebuilt.get(i))
                    for i in live.keys() | rebuilt.keys()
                    if live.get(i) != rebuilt.get(i)
                }
                raise BrokenPromiseError(
                    f"{QUEUE}[{partition}] rebuilt from the log differs: {differ}"
                )


def _served_by(node: Node) -> list[tuple[int, str]]:
    return [(o.partition, o.shard) for o in node.owner.partitions.serving() if o.queue == QUEUE]


def _within(seconds: float, command: Callable[[], object]) -> None:
    """Run `command`; BrokenPromiseError when it has not ended within `seconds` (it is
    left running, on a daemon thread)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            command()
        except BaseException as exc:  # re-raised on the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="operator-tool", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise BrokenPromiseError(f"a command line tool has not ended after {seconds:.0f} s")
    if failure:
        raise failure[0]


def _unread(_: str) -> None:
    """What a command line tool prints: nobody reads it here."""


def _held_by(job: Job, worker: str) -> bool:
    return job.state is JobState.IN_PROGRESS and job.claim_source == worker


def _seen(jobs: Jobs) -> dict[bytes, tuple[JobState, str | None, int]]:
    return {b: (j.state, j.claim_source, j.attempts_remaining) for b, (_, j) in jobs.items()}


_EXAMPLES = os.environ.get("PINLEDGER_STATEFUL_EXAMPLES")
TestLedger = LedgerMachine.TestCase
TestLedger.settings = settings(
    max_examples=int(_EXAMPLES) if _EXAMPLES else 40,
    stateful_step_count=25,
    deadline=None,
    derandomize=not _EXAMPLES,
    database=None,
    # No explain phase: it reruns the failing example under a tracer, slowly, and says
    # nothing a shrunk sequence of these steps does not.
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
