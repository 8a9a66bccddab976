"""The PinLater methods: Thrift structs in, ledger commands out, projections read.

Every mutation is decided (`ledger.commands`), appended (`LedgerWriter`), applied by
the partition's owner (`state.evolve`) and projected; nothing here writes job state.
Reads come from the projection, waiting (bounded) until it has reached what the
caller's descriptors, or this server's own appends, put in the log.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import psycopg
from thriftpy2.thrift import TApplicationException

from pinledger.idl import pinlater
from pinledger.ledger import descriptor
from pinledger.ledger.commands import (
    Limits,
    NewJob,
    RefusalCode,
    Refused,
    check_limit,
    check_priority,
    check_queue_name,
    decide_checkpoint,
    decide_delete,
    decide_enqueue,
    decide_failure,
    decide_retry,
    decide_success,
)
from pinledger.ledger.descriptor import DescriptorError, JobDescriptor
from pinledger.ledger.events import Actor, Checkpointed, Event
from pinledger.ledger.log import Log, LogError
from pinledger.ledger.state import JobState
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.history import build_history
from pinledger.projections.pg.store import (
    InvalidRegexError,
    JobFilter,
    JobRow,
    QueueRow,
    ScanKey,
    Store,
    StoreError,
)
from pinledger.service.api import history as history_thrift
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.ratelimit import QueueRateLimits
from pinledger.service.config import Config
from pinledger.service.observability import telemetry
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.owner import Claimed, Owner, now_ms
from pinledger.service.password import check_password
from pinledger.service.queue_config import QueueConfig

log = logging.getLogger(__name__)

ErrorCode = pinlater.ErrorCode
F = TypeVar("F", bound=Callable[..., Any])

# Jobs per record for bulk actions (retry, delete): as many as one enqueue record holds.
_BULK_CHUNK = 1000
_INT32_MAX = 2**31 - 1


def _error(code: int, message: str) -> Exception:
    exc: Exception = pinlater.PinLaterException(errorCode=code, message=message)
    return exc


def _refusal_code(code: RefusalCode) -> int:
    # PinLater has no "invalid argument" code; UNKNOWN with a message saying what is
    # wrong is what its clients already handle.
    return int(getattr(ErrorCode, code.name, ErrorCode.UNKNOWN))


def rpc(method: F) -> F:
    """Times and counts a method and turns failures into PinLater errors: a refusal
    into its ErrorCode, an unreachable Kafka or Postgres into SHARD_CONNECTION_FAILED,
    anything unexpected into an INTERNAL_ERROR application exception (an undeclared
    exception would make thriftpy2 drop the connection)."""
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: Handler, *args: Any) -> Any:
        started = time.perf_counter()
        code = "ok"
        span = telemetry.start_rpc(name, args)  # None while tracing is off
        result = None
        try:
            result = method(self, *args)
            return result
        except pinlater.PinLaterException as exc:
            code = str(exc.errorCode)
            raise
        except Refused as exc:
            code = exc.code.name
            raise _error(_refusal_code(exc.code), exc.message) from None
        except DescriptorError as exc:
            code = "descriptor"
            raise _error(ErrorCode.UNKNOWN, f"malformed job descriptor: {exc}") from None
        except InvalidRegexError as exc:
            code = "regex"
            raise _error(ErrorCode.UNKNOWN, str(exc)) from None
        except (LogError, StoreError, psycopg.OperationalError) as exc:
            code = "shard"
            log.warning("%s failed: %s", name, exc)
            raise _error(ErrorCode.SHARD_CONNECTION_FAILED, f"storage unavailable: {exc}") from None
        except Exception as exc:
            code = "internal"
            log.exception("%s failed", name)
            raise TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"{name}: {type(exc).__name__}: {exc}"
            ) from None
        finally:
            self.metrics.count("pinledger_rpc_total", method=name)
            if code != "ok":
                self.metrics.count("pinledger_rpc_errors_total", method=name, code=code)
            self.metrics.observe(
                "pinledger_rpc_seconds", time.perf_counter() - started, method=name
            )
            if span is not None:
                telemetry.end_rpc(span, name, args, result, code)

    return wrapper  # type: ignore[return-value]


def _actor(context: Any, server: str) -> Actor:
    if context is None:
        return Actor(server=server)
    return Actor(source=context.source or "", request_id=context.requestId or "", server=server)


def _required(value: Any, what: str) -> Any:
    if value is None:
        raise Refused(RefusalCode.INVALID_ARGUMENT, f"{what} is required")
    return value


class QueueDirectory:
    """Queue names and partition counts, from the projected catalog. Cached so that
    enqueue does not wait on Postgres; a miss re-reads (a queue just created)."""

    def __init__(self, store: Store, refresh_s: float = 1.0) -> None:
        self.store = store
        # Told the queue names whenever they change (the server points it at the owner,
        # which subscribes to their topics).
        self.on_change: Callable[[set[str]], None] = lambda _: None
        self._queues: dict[str, QueueRow] = {}
        self._read_at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._refresh_s = refresh_s
        self.refresh()

    def start(self) -> None:
        """Re-read every `refresh_s`, so a queue deleted through another server stops
        taking enqueues here too."""

        def loop() -> None:
            while not self._stop.wait(self._refresh_s):
                try:
                    self.refresh()
                except Exception as exc:
                    log.warning("cannot refresh the queue list: %s", exc)

        threading.Thread(target=loop, name="queue-directory", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def refresh(self) -> None:
        rows = {row.name: row for row in self.store.queues()}
        with self._lock:
            changed = rows.keys() != self._queues.keys()
            self._queues = rows
            self._read_at = time.monotonic()
        if changed:
            self.on_change(set(rows))

    def get(self, name: str) -> QueueRow | None:
        row = self._queues.get(name)
        if row is None and time.monotonic() - self._read_at > 0.05:
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


class Handler:
    def __init__(
        self,
        config: Config,
        store: Store,
        writer: LedgerWriter,
        owner: Owner,
        metrics: Metrics,
        queues: QueueDirectory,
        rate_limits: QueueRateLimits,
        queue_config: Callable[[], QueueConfig],
        peers: PeerPool,
    ) -> None:
        self.config = config
        self.store = store
        self.writer = writer
        self.owner = owner
        self.metrics = metrics
        self.queues = queues
        self.rate_limits = rate_limits
        self.queue_config = queue_config
        self.peers = peers
        self.limits = Limits(max_priority=config.max_priority, max_body_bytes=config.max_body_bytes)
        self._round_robin: dict[str, itertools.count[int]] = {}

    # -- helpers -------------------------------------------------------------------

    def _queue(self, name: Any) -> QueueRow:
        if not isinstance(name, str):
            raise Refused(RefusalCode.QUEUE_NAME_INVALID, "queueName is required")
        check_queue_name(name)
        row = self.queues.get_or_log(name, self.writer.log, self.writer.topic(name))
        if row is None:
            raise _error(ErrorCode.QUEUE_NOT_FOUND, f"queue {name!r} does not exist")
        return row

    def _descriptors(self, queue: QueueRow, texts: Iterable[Any]) -> list[JobDescriptor]:
        found = [_parse_descriptor(text) for text in texts]
        for parsed in found:
            _check_descriptor(queue, parsed)
        return found

    def _wait_projected(self, keys: dict[tuple[str, int], int]) -> None:
        """Wait (at most read_wait_s) until the projection holds the record at each
        given offset, and everything this server appended to those partitions."""
        needed = {
            key: max(offset, self.writer.appended.get(key, -1)) for key, offset in keys.items()
        }
        needed = {key: offset for key, offset in needed.items() if offset >= 0}
        deadline = time.monotonic() + self.config.read_wait_s
        pause = 0.002
        capped = False
        while needed:
            reached = self.store.offsets(needed)
            needed = {k: o for k, o in needed.items() if reached.get(k, 0) <= o}
            if needed and not capped and pause >= 0.016:
                # Still waiting: a descriptor may name an offset the log never reached
                # (a made-up or mistyped one); nothing beyond the log's end is worth
                # waiting for.
                capped = True
                ends = self.writer.log.end_offsets(list(needed))
                needed = {
                    k: min(o, max(ends[k] - 1, self.writer.appended.get(k, -1))) if k in ends else o
                    for k, o in needed.items()
                }
                needed = {k: o for k, o in needed.items() if o >= 0}
            if not needed or time.monotonic() >= deadline:
                if needed:
                    log.info("read served before the projection reached %s", needed)
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _check_password(self, password: Any) -> None:
        if not self.config.admin_password_sha256:
            raise _error(
                ErrorCode.PASSWORD_INVALID,
                "no admin password is configured on this server "
                "(set PINLEDGER_ADMIN_PASSWORD_SHA256; see `pinledger hash-password`)",
            )
        if not check_password(
            password or "", self.config.admin_salt, self.config.admin_password_sha256
        ):
            raise _error(ErrorCode.PASSWORD_INVALID, "the admin password is wrong")

    def _wait_catalog(self, name: str, present: bool) -> None:
        """Wait (bounded) until getQueueNames shows the change. The change is in the
        log already, so running out of time is not an error: the queue takes (or
        refuses) jobs from its topic at once, and the name list follows."""
        deadline = time.monotonic() + max(10.0, self.config.read_wait_s)
        while time.monotonic() < deadline:
            self.queues.refresh()
            if (self.queues.get(name) is not None) == present:
                return
            time.sleep(0.02)
        log.warning(
            "queue %r %s in the ledger; the catalog projection has not caught up yet",
            name,
            "created" if present else "deleted",
        )

    # -- queues ----------------------------------------------------------------------

    @rpc
    def createQueue(self, context: Any, name: Any) -> None:
        if not isinstance(name, str):
            raise Refused(RefusalCode.QUEUE_NAME_INVALID, "name is required")
        check_queue_name(name)
        if self.queues.get(name) is not None:
            return
        partitions = self.queue_config().settings(name).partitions or self.config.partitions
        self.writer.create_queue(name, partitions, now_ms(), _actor(context, self.config.server_id))
        self.owner.add_queue(name)
        self._wait_catalog(name, present=True)
        self._wait_owned(name, partitions)

    def _wait_owned(self, name: str, partitions: int) -> None:
        """Wait (bounded) until the new queue's partitions have owners that serve them, so
        a job enqueued and looked up right after createQueue is seen. The owners' group
        takes a rebalance, seconds on a busy machine, to hand a new topic out. Running out
        of time is not an error: the queue exists and will be served."""
        deadline = time.monotonic() + max(10.0, self.config.read_wait_s)
        while time.monotonic() < deadline:
            try:
                if self.owner.serves_all(name, partitions):
                    return
            except LogError as exc:
                log.warning("cannot tell whether queue %r is owned yet: %s", name, exc)
            time.sleep(0.05)
        log.warning("queue %r created; not every partition has a serving owner yet", name)

    @rpc
    def deleteQueue(self, context: Any, name: Any, password: Any) -> None:
        self._check_password(password)
        if not isinstance(name, str):
            raise Refused(RefusalCode.QUEUE_NAME_INVALID, "name is required")
        check_queue_name(name)
        if self.queues.get(name) is None:
            return  # idempotent
        self.writer.delete_queue(name, now_ms(), _actor(context, self.config.server_id))
        self._wait_catalog(name, present=False)

    @rpc
    def getQueueNames(self, context: Any) -> set[str]:
        return self.queues.names()

    # -- enqueue -------------------------------------------------------------------------

    def _partition_for(self, queue: QueueRow) -> int:
        drained = self.queue_config().settings(queue.name).drained_partitions
        open_ = [p for p in range(queue.partitions) if p not in drained]
        if not open_:
            raise Refused(
                RefusalCode.ENQUEUE_REJECTED,
                f"every partition of queue {queue.name!r} is draining (drainPartitions in "
                "the queue config): it takes no new jobs",
            )
        counter = self._round_robin.setdefault(queue.name, itertools.count(random.randrange(64)))
        return open_[next(counter) % len(open_)]

    @rpc
    def enqueueJobs(self, context: Any, request: Any) -> Any:
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        jobs = [
            NewJob(
                body=_required(job.body, f"job {i}: body"),
                priority=job.priority if job.priority is not None else 1,
                run_after=job.runAfterTimestampMillis,
                attempts_allowed=job.numAttemptsAllowed
                if job.numAttemptsAllowed is not None
                else 2,
                custom_status=job.customStatus or "",
            )
            for i, job in enumerate(request.jobs or [])
        ]
        now = now_ms()
        events = decide_enqueue(jobs, now, self.limits)
        if not events:
            return pinlater.PinLaterEnqueueResponse(jobDescriptors=[])
        descriptors = self.writer.enqueue(
            queue.name,
            self._partition_for(queue),
            events,
            now,
            _actor(context, self.config.server_id),
            telemetry.current_traceparent(),
        )
        self.metrics.count("pinledger_jobs_total", len(events), queue=queue.name, action="enqueue")
        return pinlater.PinLaterEnqueueResponse(jobDescriptors=[str(d) for d in descriptors])

    # -- dequeue ---------------------------------------------------------------------------

    def _response(self, claimed: Sequence[Claimed], queue: str) -> Any:
        jobs, metadata, traceparents = {}, {}, {}
        for item in claimed:
            key = str(JobDescriptor(queue, item.partition, item.job.priority, item.job.local_id))
            jobs[key] = item.job.body
            metadata[key] = pinlater.PinLaterDequeueMetadata(
                attemptsAllowed=item.job.attempts_allowed,
                attemptsRemaining=item.job.attempts_remaining,
            )
            if item.traceparent:
                traceparents[key] = item.traceparent
        return pinlater.PinLaterDequeueResponse(
            jobs=jobs, jobMetadata=metadata, jobTraceparents=traceparents or None
        )

    @rpc
    def dequeueJobs(self, context: Any, request: Any) -> Any:
        request, queue, limit, coverage = self._dequeue_request(request)
        if request.jobAckRequest is not None:
            # Acks first and always: PinLater dropped them on a rate-limited dequeue.
            self._ack(context, request.jobAckRequest, queue)
        now = now_ms()
        actor = _actor(context, self.config.server_id)
        if request.dryRun:
            found = self.owner.peek(queue.name, limit, now, coverage)
            return self._forward(self._response(found, queue.name), context, request, limit)
        if not self.rate_limits.allow(queue.name):
            raise _error(
                ErrorCode.DEQUEUE_RATE_LIMITED,
                f"queue {queue.name!r} is rate limited to {self.rate_limits.rate(queue.name)} "
                "jobs/s on this server (maxJobsPerSecond in the queue config; 0 = paused)",
            )
        claimed = self.owner.dequeue(queue.name, limit, now, actor, coverage)
        response = self._forward(self._response(claimed, queue.name), context, request, limit)
        self.rate_limits.charge(queue.name, len(response.jobs))
        self.metrics.count(
            "pinledger_jobs_total", len(response.jobs), queue=queue.name, action="dequeue"
        )
        return response

    def _dequeue_request(self, request: Any) -> tuple[Any, QueueRow, int, float]:
        """A dequeue request checked: (request, queue, limit, coverage)."""
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        limit = _required(request.limit, "limit")
        check_limit(limit)
        coverage = request.coverage if request.coverage is not None else 1.0
        return request, queue, limit, coverage

    def _forward(self, response: Any, context: Any, request: Any, limit: int) -> Any:
        """Top the response up from the other owners of the queue's partitions."""
        peers = self.owner.peers_for(request.queueName)
        random.shuffle(peers)
        for address in peers:
            if len(response.jobs) >= limit:
                break
            try:
                more = self.peers.dequeue(address, context, request, limit - len(response.jobs))
            except Exception as exc:  # a peer going away must not fail this call
                log.warning("forwarding a dequeue to %s failed: %s", address, exc)
                continue
            response.jobs.update(more.jobs or {})
            response.jobMetadata.update(more.jobMetadata or {})
            if more.jobTraceparents:
                response.jobTraceparents = {
                    **(response.jobTraceparents or {}),
                    **more.jobTraceparents,
                }
        return response

    @rpc
    def dequeueOwned(self, context: Any, request: Any) -> Any:
        request, queue, limit, coverage = self._dequeue_request(request)
        now = now_ms()
        if request.dryRun:
            return self._response(self.owner.peek(queue.name, limit, now, coverage), queue.name)
        actor = _actor(context, self.config.server_id)
        return self._response(
            self.owner.dequeue(queue.name, limit, now, actor, coverage), queue.name
        )

    # -- acks and checkpoints ----------------------------------------------------------------

    def _ack(self, context: Any, request: Any, queue: QueueRow) -> None:
        events: dict[int, list[Event]] = {}
        succeeded = request.jobsSucceeded or []
        failed = request.jobsFailed or []
        for info, parsed in zip(
            succeeded, self._descriptors(queue, (i.jobDescriptor for i in succeeded)), strict=True
        ):
            events.setdefault(parsed.partition, []).append(
                decide_success(parsed.local_id, info.appendCustomStatus or "")
            )
        for info, parsed in zip(
            failed, self._descriptors(queue, (i.jobDescriptor for i in failed)), strict=True
        ):
            events.setdefault(parsed.partition, []).append(
                decide_failure(
                    parsed.local_id, info.retryDelayMillis or 0, info.appendCustomStatus or ""
                )
            )
        self._append_by_partition(queue, events, context)
        self.metrics.count(
            "pinledger_jobs_total", len(succeeded), queue=queue.name, action="ack_success"
        )
        self.metrics.count(
            "pinledger_jobs_total", len(failed), queue=queue.name, action="ack_failure"
        )

    @rpc
    def ackDequeuedJobs(self, context: Any, request: Any) -> None:
        request = _required(request, "request")
        self._ack(context, request, self._queue(request.queueName))

    @rpc
    def checkpointJobs(self, context: Any, request: Any) -> None:
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        items = request.requests or []
        parsed = self._descriptors(queue, (item.jobDescriptor for item in items))
        events: dict[int, list[Event]] = {}
        for item, where in zip(items, parsed, strict=True):
            event = Checkpointed(
                local_id=where.local_id,
                new_body=item.newBody.encode("utf-8") if item.newBody is not None else None,
                move_to_pending=bool(item.moveToPending),
                run_after=item.runAfterTimestampMillis,
                attempts_allowed=item.numOfAttemptsAllowed,
                prepend_status=item.prependCustomStatus,
            )
            events.setdefault(where.partition, []).append(decide_checkpoint(event, self.limits))
        self._append_by_partition(queue, events, context)
        self.metrics.count(
            "pinledger_jobs_total", len(items), queue=queue.name, action="checkpoint"
        )

    # -- reads -----------------------------------------------------------------------------

    def _info(self, queue: str, row: JobRow, include_body: bool) -> Any:
        job = row.job
        return pinlater.PinLaterJobInfo(
            jobDescriptor=str(JobDescriptor(queue, row.partition, job.priority, job.local_id)),
            jobState=int(job.state),
            attemptsAllowed=job.attempts_allowed,
            attemptsRemaining=job.attempts_remaining,
            customStatus=job.custom_status,
            createdAtTimestampMillis=job.created_at,
            runAfterTimestampMillis=job.run_after,
            updatedAtTimestampMillis=job.updated_at,
            claimDescriptor=job.claim,
            body=job.body if include_body else None,
        )

    @rpc
    def lookupJobs(self, context: Any, request: Any) -> dict[str, Any]:
        request = _required(request, "request")
        by_queue: dict[str, list[JobDescriptor]] = {}
        for text in request.jobDescriptors or []:
            parsed = _parse_descriptor(text)
            by_queue.setdefault(parsed.queue, []).append(parsed)
        include_body = bool(request.includeBody)
        found: dict[str, Any] = {}
        for name, wanted in by_queue.items():
            queue = self._queue(name)
            for d in wanted:
                _check_descriptor(queue, d)
            topic = self.writer.topic(name)
            waits: dict[tuple[str, int], int] = {}
            for d in wanted:
                key = (topic, d.partition)
                waits[key] = max(waits.get(key, -1), d.offset)
            self._wait_projected(waits)
            rows = self.store.lookup(
                name, [(d.partition, d.local_id) for d in wanted], include_body
            )
            asked = {(d.partition, d.local_id): str(d) for d in wanted}
            for row in rows:
                # Answer under the descriptor asked for (priority in it is informative).
                key_text = asked.get((row.partition, row.job.local_id))
                if key_text is not None:
                    info = self._info(name, row, include_body)
                    info.jobDescriptor = key_text
                    found[key_text] = info
        return found

    @rpc
    def getJobHistory(self, context: Any, request: Any) -> Any:
        request = _required(request, "request")
        parsed = _parse_descriptor(request.jobDescriptor)
        queue = self._queue(parsed.queue)
        _check_descriptor(queue, parsed)
        self._wait_projected({(self.writer.topic(queue.name), parsed.partition): parsed.offset})
        rows = self.store.job_events(queue.name, parsed.partition, parsed.local_id)
        return history_thrift.to_thrift(build_history(parsed, rows, request.atOffset))

    def _filter(self, queue: QueueRow, state: Any, priority: Any, regex: Any) -> JobFilter:
        state = JobState(_required(state, "jobState"))
        if priority is not None:
            check_priority(priority, self.limits)
        self.store.check_regex(regex)
        return JobFilter(queue.name, state, priority, regex)

    def _settle(self, queue: QueueRow) -> None:
        """Counts and scans see this server's own writes to the queue."""
        topic = self.writer.topic(queue.name)
        self._wait_projected({(topic, p): -1 for p in range(queue.partitions)})

    @rpc
    def getJobCount(self, context: Any, request: Any) -> int:
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        where = self._filter(queue, request.jobState, request.priority, request.bodyRegexToMatch)
        self._settle(queue)
        count = self.store.count(where, now_ms(), bool(request.countFutureJobs))
        return min(count, _INT32_MAX)

    @rpc
    def scanJobs(self, context: Any, request: Any) -> Any:
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        where = self._filter(queue, request.jobState, request.priority, request.bodyRegexToMatch)
        limit = request.limit if request.limit is not None else 100
        check_limit(limit)
        after = _parse_continuation(request.continuation)
        self._settle(queue)
        rows = self.store.scan(where, now_ms(), bool(request.scanFutureJobs), after, limit + 1)
        page = rows[:limit]
        continuation = pinlater.CONTINUATION_END
        if len(rows) > limit and page:
            last = page[-1]
            continuation = f"{last.job.run_after}.{last.partition}.{last.job.local_id}"
        return pinlater.PinLaterScanJobsResponse(
            scannedJobs=[self._info(queue.name, row, False) for row in page],
            continuation=continuation,
        )

    # -- bulk actions ---------------------------------------------------------------------

    def _append_bulk(
        self,
        queue: QueueRow,
        rows: Sequence[JobRow],
        decide: Callable[[list[Any]], list[Event]],
        context: Any,
    ) -> int:
        by_part: dict[int, list[Any]] = {}
        for row in rows:
            by_part.setdefault(row.partition, []).append(row.job)
        events = {partition: decide(jobs) for partition, jobs in by_part.items()}
        count = self._append_by_partition(queue, events, context)
        if count:
            self._settle(queue)
        return count

    def _append_by_partition(
        self, queue: QueueRow, events: dict[int, list[Event]], context: Any
    ) -> int:
        """Append each partition's events, at most _BULK_CHUNK per record, in one
        round trip; returns how many events were appended."""
        batches: list[tuple[str, int, Sequence[Event]]] = [
            (queue.name, partition, evs[i : i + _BULK_CHUNK])
            for partition, evs in events.items()
            for i in range(0, len(evs), _BULK_CHUNK)
        ]
        if batches:
            self.writer.append_many(
                batches,
                now_ms(),
                _actor(context, self.config.server_id),
                telemetry.current_traceparent(),  # the call's span: acks link back to it
            )
        return sum(len(evs) for _, _, evs in batches)

    @rpc
    def retryFailedJobs(self, context: Any, request: Any) -> int:
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        priority = request.priority if request.priority is not None else 1
        attempts = request.attemptsToAllow if request.attemptsToAllow is not None else 1
        limit = request.limit if request.limit is not None else 1000
        check_limit(limit)
        where = self._filter(queue, JobState.FAILED, priority, None)
        self._settle(queue)
        rows = self.store.select(where, limit)
        now = now_ms()
        count = self._append_bulk(
            queue,
            rows,
            lambda jobs: list(
                decide_retry(jobs, attempts, request.runAfterTimestampMillis, now, len(jobs))
            ),
            context,
        )
        self.metrics.count("pinledger_jobs_total", count, queue=queue.name, action="retry")
        return count

    @rpc
    def deleteJobs(self, context: Any, request: Any) -> int:
        request = _required(request, "request")
        queue = self._queue(request.queueName)
        priority = request.priority if request.priority is not None else 1
        limit = request.limit if request.limit is not None else 1000
        check_limit(limit)
        where = self._filter(queue, request.jobState, priority, request.bodyRegexToMatch)
        self._settle(queue)
        rows = self.store.select(where, limit)
        count = self._append_bulk(
            queue, rows, lambda jobs: list(decide_delete(jobs, where.state, len(jobs))), context
        )
        self.metrics.count("pinledger_jobs_total", count, queue=queue.name, action="delete")
        return count


def _parse_descriptor(text: Any) -> JobDescriptor:
    if not isinstance(text, str):
        raise DescriptorError("jobDescriptor is required")
    return descriptor.parse(text)


def _check_descriptor(queue: QueueRow, parsed: JobDescriptor) -> None:
    """A descriptor must name the request's queue and one of its partitions."""
    if parsed.queue != queue.name:
        raise DescriptorError(
            f"{str(parsed)!r} belongs to queue {parsed.queue!r}, not {queue.name!r}"
        )
    if parsed.partition >= queue.partitions:
        raise DescriptorError(
            f"{str(parsed)!r}: queue {queue.name!r} has no partition {parsed.partition} "
            f"(it has {queue.partitions})"
        )


def _parse_continuation(token: Any) -> ScanKey | None:
    """ "0" (or nothing) starts a scan; otherwise the token a previous page returned."""
    if token is None or token == pinlater.CONTINUATION_START:
        return None
    parts = str(token).split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        run_after, partition, local_id = (int(p) for p in parts)
        if partition < 0 or local_id < 0:
            raise ValueError
    except ValueError:
        raise _error(
            ErrorCode.CONTINUATION_INVALID,
            f'continuation {token!r} is not one this server returned; use "0" to start',
        ) from None
    return ScanKey(run_after, partition, local_id)
