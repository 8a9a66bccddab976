"""`PinLaterClient`: typed, pooled, retrying access to pinledger (or PinLater) servers.

    from pinledger.client import PinLaterClient, Job
    with PinLaterClient("localhost:9010", source="billing") as pl:
        pl.create_queue("emails")
        [descriptor] = pl.enqueue("emails", [Job(b"hello")])

Every call goes to the next server of the list (round robin). A server that cannot be
reached is skipped, and tried after the others for a while (client/health.py). A call
that is safe to repeat (lookups, counts, scans, acks, checkpoints, createQueue,
deleteQueue) is retried on the next server when the connection breaks or the server
reports its storage unavailable; a call that is not (enqueue, dequeue, retryFailedJobs,
deleteJobs) is retried only when it never left this process, and otherwise fails with
ServerUnavailableError saying it may have applied.
"""

from __future__ import annotations

import itertools
import os
import socket
import ssl
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from pinledger.client.errors import (
    ClientError,
    ErrorCode,
    JobCancelled,
    PinLaterError,
    ServerUnavailableError,
)
from pinledger.client.health import ServerHealth
from pinledger.client.jobs import Ack, Checkpoint, DequeuedJob, Job, JobInfo, JobState, ScanPage
from pinledger.client.pool import Connection, ConnectionPool
from pinledger.client.servers import Address, ServerList
from pinledger.client.tls import Tls
from pinledger.idl import pinlater
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock

T = TypeVar("T")

_CONNECTION_ERRORS = (OSError, TTransportException, EOFError)


def default_source() -> str:
    """PinLater's RequestContext.source convention: "service:host"."""
    program = os.path.basename(os.environ.get("PINLEDGER_CLIENT_NAME", "") or "python")
    return f"{program}:{socket.gethostname()}"


def _job_info(info: Any) -> JobInfo:
    return JobInfo(
        descriptor=info.jobDescriptor,
        state=JobState(info.jobState),
        attempts_allowed=info.attemptsAllowed,
        attempts_remaining=info.attemptsRemaining,
        custom_status=info.customStatus,
        created_at_ms=info.createdAtTimestampMillis,
        run_after_ms=info.runAfterTimestampMillis,
        updated_at_ms=info.updatedAtTimestampMillis,
        claim=info.claimDescriptor,
        body=info.body,
        unique_key=info.uniqueKey,
    )


def _ack_infos(acks: Iterable[Ack | str]) -> list[Any]:
    infos = []
    for item in acks:
        ack = Ack(item) if isinstance(item, str) else item
        infos.append(
            pinlater.PinLaterJobAckInfo(
                jobDescriptor=ack.descriptor,
                appendCustomStatus=ack.append_status,
                retryDelayMillis=ack.retry_delay_ms,
            )
        )
    return infos


def _ack_request(queue: str, succeeded: Iterable[Ack | str], failed: Iterable[Ack | str]) -> Any:
    return pinlater.PinLaterJobAckRequest(
        queueName=queue, jobsSucceeded=_ack_infos(succeeded), jobsFailed=_ack_infos(failed)
    )


class PinLaterClient:
    """Thread-safe: each call borrows a pooled connection for its duration.

    `servers` is a `host:port`, a list of them, a ServerList, or the path of a
    server-list file (one `host:port` per line, re-read when it changes). `tls`: the
    servers' Thrift ports speak TLS (client.tls.Tls: the CA, a client certificate; or
    an ssl.SSLContext of your own).
    """

    def __init__(
        self,
        servers: ServerList | str | Sequence[str | Address] = "127.0.0.1:9010",
        *,
        source: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 2.0,
        retries: int = 2,
        retry_backoff_s: float = 0.1,
        pool_size: int = 8,
        clock: Clock = SYSTEM_CLOCK,
        tls: Tls | ssl.SSLContext | None = None,
    ) -> None:
        self.servers = ServerList.of(servers)
        self.source = source or default_source()
        self.retries = retries
        self.clock = clock
        self.retry_backoff_s = retry_backoff_s
        # Built once, here: a TLS file that cannot be used fails the constructor.
        context = tls.context() if isinstance(tls, Tls) else tls
        self.pool = ConnectionPool(connect_timeout_s, timeout_s, pool_size, context)
        self.health = ServerHealth(clock)
        self._request_ids = itertools.count(1)
        self._client_id = uuid.uuid4().hex[:8]

    def __enter__(self) -> PinLaterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.close()

    def context(self) -> Any:
        return pinlater.RequestContext(
            source=self.source, requestId=f"{self._client_id}-{next(self._request_ids)}"
        )

    # ---- the call path ----

    def call(self, method: str, *args: Any, idempotent: bool) -> Any:
        """Call a Thrift method by name with a fresh RequestContext; the raw answer."""
        return self._call(lambda c: getattr(c, method)(self.context(), *args), idempotent)

    def _call(self, invoke: Callable[[Any], T], idempotent: bool) -> T:
        failures: list[str] = []
        for round_ in range(self.retries + 1):
            if round_:
                self.clock.sleep(self.retry_backoff_s * 2 ** (round_ - 1))
            for address in self.health.order(self.servers.current()):
                try:
                    connection, _fresh = self.pool.acquire(address)
                except _CONNECTION_ERRORS as exc:
                    self.health.failed(address, exc)
                    failures.append(f"{address}: cannot connect: {exc}")
                    continue
                self.health.connected(address)
                try:
                    result = invoke(connection.client)
                except pinlater.PinLaterException as exc:
                    self.pool.release(connection)
                    if getattr(exc, "cancelledJobDescriptors", None):
                        # A checkpoint of cancelled jobs: news, never repeated.
                        raise JobCancelled(
                            list(exc.cancelledJobDescriptors), exc.message, str(address)
                        ) from None
                    error = PinLaterError(ErrorCode(exc.errorCode), exc.message, str(address))
                    if not (error.transient and idempotent):
                        raise error from None
                    failures.append(f"{address}: {error}")
                    continue
                except TApplicationException as exc:
                    self.pool.discard(connection)
                    raise ClientError(f"{address} failed the call: {exc.message}") from None
                except _CONNECTION_ERRORS as exc:
                    self.pool.discard(connection)
                    failures.append(f"{address}: connection broke: {exc}")
                    if not idempotent:
                        raise ServerUnavailableError(
                            f"{address}: connection broke during the call, which may or may "
                            f"not have been applied and is not safe to repeat: {exc}"
                        ) from None
                    continue
                self.pool.release(connection)
                return result
        raise ServerUnavailableError(
            f"no server could serve the call after {self.retries + 1} rounds: "
            + "; ".join(failures[-4:])
        )

    # ---- queues ----

    def create_queue(self, name: str) -> None:
        self.call("createQueue", name, idempotent=True)

    def delete_queue(self, name: str, password: str = "") -> None:
        self.call("deleteQueue", name, password, idempotent=True)

    def queue_names(self) -> set[str]:
        # thriftpy2 decodes a Thrift set as a list.
        return set(self.call("getQueueNames", idempotent=True))

    # ---- producers ----

    def enqueue(self, queue: str, jobs: Iterable[Job]) -> list[str]:
        """Enqueue jobs in one call; their descriptors, in order. A job with a
        `unique_key` is answered the job holding its key when one does (decision 0037);
        a call whose every job has a key is retried on a lost connection like a read,
        since enqueueing it twice makes each job once."""
        listed = list(jobs)
        request = pinlater.PinLaterEnqueueRequest(
            queueName=queue,
            jobs=[
                pinlater.PinLaterJob(
                    body=job.body,
                    priority=job.priority,
                    runAfterTimestampMillis=job.run_after_ms,
                    numAttemptsAllowed=job.attempts_allowed,
                    customStatus=job.custom_status,
                    uniqueKey=job.unique_key,
                )
                for job in listed
            ],
        )
        keyed = bool(listed) and all(job.unique_key is not None for job in listed)
        response = self.call("enqueueJobs", request, idempotent=keyed)
        descriptors: list[str] = response.jobDescriptors
        return descriptors

    def enqueue_one(self, queue: str, body: bytes, **job: Any) -> str:
        return self.enqueue(queue, [Job(body, **job)])[0]

    # ---- workers ----

    def dequeue(
        self,
        queue: str,
        limit: int,
        *,
        succeeded: Iterable[Ack | str] = (),
        failed: Iterable[Ack | str] = (),
        dry_run: bool = False,
    ) -> list[DequeuedJob]:
        """Claim up to `limit` runnable jobs, highest priority first; acks given here
        are applied first (piggybacked, one round trip)."""
        succeeded, failed = list(succeeded), list(failed)
        request = pinlater.PinLaterDequeueRequest(
            queueName=queue,
            limit=limit,
            dryRun=dry_run,
            jobAckRequest=_ack_request(queue, succeeded, failed) if succeeded or failed else None,
        )
        response = self.call("dequeueJobs", request, idempotent=False)
        metadata = response.jobMetadata or {}
        # pinledger's addition to the response; absent from PinLater servers.
        traceparents = getattr(response, "jobTraceparents", None) or {}
        jobs = []
        for descriptor, body in (response.jobs or {}).items():
            meta = metadata.get(descriptor)
            allowed = meta.attemptsAllowed if meta and meta.attemptsAllowed is not None else 1
            remaining = meta.attemptsRemaining if meta and meta.attemptsRemaining is not None else 1
            jobs.append(
                DequeuedJob(descriptor, body, allowed, remaining, traceparents.get(descriptor))
            )
        return jobs

    def ack(
        self, queue: str, succeeded: Iterable[Ack | str] = (), failed: Iterable[Ack | str] = ()
    ) -> None:
        """Acks are safe to repeat: an ack that already applied is rejected by the
        ledger and changes nothing."""
        self.call("ackDequeuedJobs", _ack_request(queue, succeeded, failed), idempotent=True)

    def checkpoint(self, queue: str, checkpoints: Iterable[Checkpoint]) -> None:
        request = pinlater.PinLaterCheckpointJobsRequest(
            queueName=queue,
            requests=[
                pinlater.PinLaterCheckpointJobRequest(
                    jobDescriptor=c.descriptor,
                    newBody=c.new_body,
                    moveToPending=c.move_to_pending,
                    runAfterTimestampMillis=c.run_after_ms,
                    numOfAttemptsAllowed=c.attempts_allowed,
                    prependCustomStatus=c.prepend_status,
                )
                for c in checkpoints
            ],
        )
        self.call("checkpointJobs", request, idempotent=True)

    # ---- operators ----

    def lookup(self, descriptors: Iterable[str], include_body: bool = False) -> dict[str, JobInfo]:
        """Jobs by descriptor (of any queues); a job that no longer exists is absent."""
        request = pinlater.PinLaterLookupJobRequest(
            jobDescriptors=list(descriptors), includeBody=include_body
        )
        answer = self.call("lookupJobs", request, idempotent=True)
        return {d: _job_info(info) for d, info in answer.items()}

    def count(
        self,
        queue: str,
        state: JobState,
        *,
        priority: int | None = None,
        count_future: bool = False,
        body_regex: str | None = None,
    ) -> int:
        request = pinlater.PinLaterGetJobCountRequest(
            queueName=queue,
            jobState=int(state),
            priority=priority,
            countFutureJobs=count_future,
            bodyRegexToMatch=body_regex,
        )
        count: int = self.call("getJobCount", request, idempotent=True)
        return count

    def scan(
        self,
        queue: str,
        state: JobState,
        *,
        priority: int | None = None,
        future: bool = False,
        continuation: str = "0",
        limit: int = 100,
        body_regex: str | None = None,
    ) -> ScanPage:
        request = pinlater.PinLaterScanJobsRequest(
            queueName=queue,
            jobState=int(state),
            priority=priority,
            scanFutureJobs=future,
            continuation=continuation,
            limit=limit,
            bodyRegexToMatch=body_regex,
        )
        answer = self.call("scanJobs", request, idempotent=True)
        return ScanPage([_job_info(i) for i in answer.scannedJobs], answer.continuation or "-1")

    def retry_failed(
        self,
        queue: str,
        *,
        priority: int = 1,
        attempts: int = 1,
        run_after_ms: int | None = None,
        limit: int = 1000,
    ) -> int:
        request = pinlater.PinLaterRetryFailedJobsRequest(
            queueName=queue,
            priority=priority,
            attemptsToAllow=attempts,
            runAfterTimestampMillis=run_after_ms,
            limit=limit,
        )
        retried: int = self.call("retryFailedJobs", request, idempotent=False)
        return retried

    def delete_jobs(
        self,
        queue: str,
        state: JobState,
        *,
        priority: int = 1,
        body_regex: str | None = None,
        limit: int = 1000,
    ) -> int:
        request = pinlater.PinLaterDeleteJobsRequest(
            queueName=queue,
            jobState=int(state),
            priority=priority,
            bodyRegexToMatch=body_regex,
            limit=limit,
        )
        deleted: int = self.call("deleteJobs", request, idempotent=False)
        return deleted

    def cancel_jobs(self, queue: str, descriptors: Iterable[str], reason: str = "") -> list[str]:
        """cancelJobs (decision 0036): the PENDING and IN_PROGRESS jobs among
        `descriptors` end FAILED, "cancelled by <this client's source>: <reason>" in their
        custom status; returns the descriptors whose jobs are cancelled. Safe to repeat:
        a job cancelled already is answered as cancelled, and not cancelled again."""
        request = pinlater.PinLaterCancelJobsRequest(
            queueName=queue, jobDescriptors=list(descriptors), reason=reason
        )
        answer = self.call("cancelJobs", request, idempotent=True)
        return list(answer.cancelledJobDescriptors or [])


__all__ = ["Connection", "PinLaterClient"]
