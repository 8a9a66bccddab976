"""Dequeue from owned partitions (Thrift handler threads): take due jobs from the ready
buffers, reserve them, append one claim record per partition, and answer once the
broker has the records. A job stays reserved until its claim is projected, so two
dequeues never hand out the same job. When the append fails, the dequeue fails, and
its jobs are released at once only when the error says nothing was written
(NotAppendedError); any other failure may have left the claim in the log (an
acknowledgement lost, a timeout after which it lands), so the jobs stay reserved until
the projection shows whether it landed (ready_buffer.py, `doubt`).

Locking: the partitions' lock (partitions.py) is held while reading the serving
partitions and taking from their buffers, never across the append; it also guards the
stop gate (`close`): whether dequeues may still take from the buffers, and how many
claim appends are in flight.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from pinledger.ledger.commands import decide_claims
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Actor, Event
from pinledger.ledger.log import LogError, NotAppendedError
from pinledger.ledger.state import Job
from pinledger.ledger.writer import LedgerWriter, Traced
from pinledger.service.observability import catalogue, job_trace
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.ready_buffer import take
from pinledger.service.ownership.spans import job_span, naming

log = logging.getLogger(__name__)


class DequeuedJob(NamedTuple):
    """A job handed to a dequeue, with the partition it lives in and the trace context
    its worker continues: the attempt's (job_trace.py), or the job's for a dry run; None
    when its enqueue was not traced (a named tuple: one per job dequeued)."""

    partition: int
    job: Job
    traceparent: str | None = None


def serving_parts(owned: Sequence[Owned], queue: str, coverage: float) -> list[Owned]:
    """The serving partitions of `queue` a dequeue looks at (never a retired one): a
    random share of them when `coverage` is below 1 (at least one)."""
    parts = [o for o in owned if o.queue == queue and o.serving and not o.retired]
    if 0 < coverage < 1 and len(parts) > 1:
        parts = random.sample(parts, max(1, math.ceil(coverage * len(parts))))
    return parts


class Claims:
    def __init__(
        self,
        server_id: str,
        started_ms: int,
        partitions: Partitions,
        writer: LedgerWriter,
        metrics: Metrics,
        lease: Callable[[], bool] = lambda: True,
    ) -> None:
        """`lease`: whether the owners' group confirmed this server recently enough
        that it still owns its partitions (lease.py)."""
        self.server_id = server_id
        self.lease = lease
        self.started_ms = started_ms
        self.partitions = partitions
        self.writer = writer
        self.metrics = metrics
        self._claims = itertools.count(1)
        # The stop gate, under the partitions' lock: once closed no dequeue takes from
        # the buffers again; `_in_flight` counts the dequeues that took jobs and have
        # not finished appending their claims, which `close` waits for.
        self._closed = False
        self._in_flight = 0
        self._settled = threading.Condition(partitions.lock)

    def new_claim(self, source: str) -> str:
        """A claim descriptor unique to one dequeue call: server, its start time, the
        caller and a counter, as PinLater made them."""
        return f"{self.server_id}:{self.started_ms}:{source}:{next(self._claims)}"

    def _serving(self, queue: str, coverage: float, leased: bool) -> list[Owned]:
        """Call with the partitions' lock held; `leased`: the lease, checked before
        (it reads the group reader and may log: not under this lock)."""
        if self._closed or not leased:
            return []
        return serving_parts(list(self.partitions.owned.values()), queue, coverage)

    def close(self, timeout_s: float) -> bool:
        """Stop serving before the server leaves the owners' group: every owned partition
        stops serving and no dequeue takes from the buffers again; then wait (at most
        `timeout_s`) until the claim appends in flight have ended, so that the next
        owner, which serves once it has projected up to the log's end it read when
        assigned, sees them. False when some were still in flight at the timeout."""
        with self._settled:
            self._closed = True
            for owned in self.partitions.owned.values():
                owned.serving = False
            return self._settled.wait_for(lambda: self._in_flight == 0, timeout_s)

    def _landed(self) -> None:
        """A dequeue's claim append has ended (call with the partitions' lock held)."""
        self._in_flight -= 1
        if self._closed and self._in_flight == 0:
            self._settled.notify_all()

    def peek(self, queue: str, limit: int, now: int, coverage: float = 1.0) -> list[DequeuedJob]:
        """dryRun: the jobs a dequeue would get, untouched."""
        leased = self.lease()
        with self.partitions.lock:
            found = [
                (
                    job.priority,
                    job.run_after,
                    DequeuedJob(
                        o.partition,
                        job,
                        job_trace.job_traceparent(
                            o.traceparents.get(job.local_id),
                            str(JobDescriptor(queue, o.partition, job.priority, job.local_id)),
                        ),
                    ),
                )
                for o in self._serving(queue, coverage, leased)
                for job in o.buffer.due(now, limit)
            ]
        found.sort(key=lambda item: (item[0], item[1]))
        return [claimed for _, _, claimed in found[:limit]]

    def dequeue(
        self,
        queue: str,
        limit: int,
        now: int,
        actor: Actor,
        coverage: float = 1.0,
        alongside: Traced | None = None,
    ) -> list[DequeuedJob]:
        """Claim up to `limit` due jobs from owned partitions of `queue`: one claim
        record per partition, answered once the broker has them. `alongside` (the
        call's piggybacked acks) is appended in the same round trip, before the claims,
        and whether or not any job is claimed."""
        claim = self.new_claim(actor.source)
        leased = self.lease()
        with self.partitions.lock:
            parts = self._serving(queue, coverage, leased)
            taken = take([o.buffer for o in parts], now, limit) if limit > 0 else []
            contexts = [parts[index].traceparents.get(job.local_id) for index, job in taken]
            if taken:
                self._in_flight += 1
        if not taken:
            if alongside is not None:
                self.writer.append_many(alongside[0], now, actor, alongside[1])
            return []
        by_part: dict[int, list[Job]] = {}
        for index, job in taken:
            by_part.setdefault(index, []).append(job)
        appends: list[tuple[str, int, Sequence[Event]]] = [
            (queue, parts[index].partition, decide_claims(jobs, claim, now, limit))
            for index, jobs in by_part.items()
        ]
        named: list[JobDescriptor] = []

        def descriptors() -> list[JobDescriptor]:
            # Only for traces: a dequeue with tracing off never builds them.
            if not named:
                named.extend(
                    JobDescriptor(queue, parts[index].partition, job.priority, job.local_id)
                    for index, job in taken
                )
            return named

        def jobs_traces() -> Iterator[str | None]:
            for tp, d in zip(contexts, descriptors(), strict=True):
                yield job_trace.job_traceparent(tp, str(d))

        # A child of the dequeue's RPC span, linking to each job's trace.
        with job_span(
            f"pinledger claim {queue}",
            jobs_traces(),
            lambda: {
                "pinledger.queue": queue,
                "pinledger.claim": claim,
                "pinledger.jobs": len(taken),
                **naming(descriptors()),
            },
        ) as traceparent:
            sets: list[Traced] = [(appends, traceparent)]
            if alongside is not None:
                sets.insert(0, alongside)
            try:
                self.writer.append_traced(sets, now, actor)
            except NotAppendedError:
                with self.partitions.lock:
                    for index, jobs in by_part.items():
                        parts[index].buffer.release(job.local_id for job in jobs)
                raise
            except LogError as exc:
                # Handed to nobody: if the claim landed, its worker was told the dequeue
                # failed and the claim times out; if not, the jobs are released once
                # the projection has passed the log's end (Partitions.settle_doubts).
                with self.partitions.lock:
                    for index, jobs in by_part.items():
                        parts[index].buffer.doubt(job.local_id for job in jobs)
                log.warning(
                    "claim %s of %d job(s) of queue %s may be in the log although its append "
                    "failed (%s): they stay reserved until the projection shows whether it "
                    "landed",
                    claim,
                    len(taken),
                    queue,
                    exc,
                )
                raise
            finally:
                with self.partitions.lock:
                    self._landed()
        if not self.lease():
            # Acknowledged after the lease lapsed: another server may have been given
            # the partitions before the claims landed, and hand the jobs out too. Handed
            # to nobody, the claims time out into retries.
            log.warning(
                "claim %s of %d job(s) of queue %s landed after this server's lease "
                "lapsed: not handed out, the jobs are retried after their claim timeout",
                claim,
                len(taken),
                queue,
            )
            return []
        self.metrics.observe_many(
            catalogue.DEQUEUE_DELAY_SECONDS,
            [max(0, now - job.run_after) / 1000 for _, job in taken],
            queue=queue,
        )
        # Each worker gets the context of the attempt its claim starts (in the job's
        # own trace), so that its processing nests in the attempt.
        return [
            DequeuedJob(
                parts[index].partition,
                job,
                None
                if tp is None
                else job_trace.attempt_traceparent(tp, str(descriptors()[i]), claim),
            )
            for i, ((index, job), tp) in enumerate(zip(taken, contexts, strict=True))
        ]
