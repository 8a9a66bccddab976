"""The PinLater service object thriftpy2 calls: one method per RPC, each parsing its
Thrift arguments once (requests.py) and handing them to the module of its group.

queues.py (createQueue, deleteQueue, getQueueNames), enqueue.py, dequeue.py
(dequeueJobs, dequeueOwned), acks.py (ackDequeuedJobs, checkpointJobs), reads.py
(lookupJobs, getJobHistory, getJobCount, scanJobs), bulk.py (retryFailedJobs,
deleteJobs), cancel.py (cancelJobs). They share core.py: load the queue, decide with
`ledger.commands`, append. Errors become PinLater's in one place, errors.py (`rpc`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pinledger.idl import pinlater
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.ledger.commands import Limits, NewJob
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import LedgerStore
from pinledger.service.api import acks, bulk, cancel, dequeue, enqueue, queues, reads
from pinledger.service.api import requests as parse
from pinledger.service.api.core import Api, OwnerPort
from pinledger.service.api.directory import QueueDirectory
from pinledger.service.api.errors import rpc
from pinledger.service.api.peers import PeerPool
from pinledger.service.api.ratelimit import QueueRateLimits
from pinledger.service.config import Config
from pinledger.service.observability.metrics import Metrics
from pinledger.service.queue_config import QueueConfig


class Handler:
    """The PinLater methods (their names are the wire contract). Arguments and results
    are thriftpy2 structs, hence `Any`. Every method parses its RequestContext, also
    those that record nothing: a caller whose source no rule allows hears so at once."""

    def __init__(
        self,
        config: Config,
        store: LedgerStore,
        writer: LedgerWriter,
        owner: OwnerPort,
        metrics: Metrics,
        queues: QueueDirectory,
        rate_limits: QueueRateLimits,
        queue_config: Callable[[], QueueConfig],
        peers: PeerPool,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.metrics = metrics
        self.clock = clock
        self.api = Api(
            config=config,
            store=store,
            writer=writer,
            owner=owner,
            metrics=metrics,
            queues=queues,
            rate_limits=rate_limits,
            queue_config=queue_config,
            peers=peers,
            clock=clock,
            limits=Limits(max_priority=config.max_priority, max_body_bytes=config.max_body_bytes),
        )
        self._partitions = enqueue.PartitionChooser(config.enqueue_sticky_ms)

    @rpc
    def createQueue(self, context: Any, name: Any) -> None:
        queues.create_queue(
            self.api, parse.parse_caller(context), parse.parse_queue_name(name, "name")
        )

    @rpc
    def deleteQueue(self, context: Any, name: Any, password: Any) -> None:
        # The password first: a caller without it learns nothing about the name.
        queues.check_admin_password(self.api, parse.parse_password(password))
        queues.delete_queue(
            self.api, parse.parse_caller(context), parse.parse_queue_name(name, "name")
        )

    @rpc
    def getQueueNames(self, context: Any) -> set[str]:
        parse.parse_caller(context)
        return queues.queue_names(self.api)

    def enqueue_scheduled(self, queue: str, job: NewJob, request_id: str) -> str:
        """A periodic job's tick (the schedules duty, decision 0038), enqueued as a
        client's enqueueJobs would be: its descriptor (a taken key's holder's)."""
        caller = parse.Caller(source="pinledger:schedule", request_id=request_id)
        response = enqueue.enqueue_jobs(
            self.api, self._partitions, caller, parse.EnqueueRequest(queue, (job,))
        )
        return str(response.jobDescriptors[0])

    @rpc
    def enqueueJobs(self, context: Any, request: Any) -> Any:
        return enqueue.enqueue_jobs(
            self.api, self._partitions, parse.parse_caller(context), parse.parse_enqueue(request)
        )

    @rpc
    def dequeueJobs(self, context: Any, request: Any) -> Any:
        return dequeue.dequeue_jobs(
            self.api, parse.parse_caller(context), parse.parse_dequeue(request)
        )

    @rpc
    def dequeueOwned(self, context: Any, request: Any) -> Any:
        return dequeue.dequeue_owned(
            self.api, parse.parse_caller(context), parse.parse_dequeue(request)
        )

    @rpc
    def ackDequeuedJobs(self, context: Any, request: Any) -> None:
        acks.ack_dequeued_jobs(self.api, parse.parse_caller(context), parse.parse_ack(request))

    @rpc
    def checkpointJobs(self, context: Any, request: Any) -> None:
        acks.checkpoint_jobs(self.api, parse.parse_caller(context), parse.parse_checkpoint(request))

    @rpc
    def lookupJobs(self, context: Any, request: Any) -> dict[str, Any]:
        parse.parse_caller(context)
        return reads.lookup_jobs(self.api, parse.parse_lookup(request))

    @rpc
    def getJobHistory(self, context: Any, request: Any) -> Any:
        parse.parse_caller(context)
        return reads.get_job_history(self.api, parse.parse_history(request))

    @rpc
    def getJobCount(self, context: Any, request: Any) -> int:
        parse.parse_caller(context)
        return reads.get_job_count(self.api, parse.parse_count(request))

    @rpc
    def scanJobs(self, context: Any, request: Any) -> Any:
        parse.parse_caller(context)
        return reads.scan_jobs(self.api, parse.parse_scan(request))

    @rpc
    def retryFailedJobs(self, context: Any, request: Any) -> int:
        return bulk.retry_failed_jobs(
            self.api, parse.parse_caller(context), parse.parse_retry(request)
        )

    @rpc
    def deleteJobs(self, context: Any, request: Any) -> int:
        return bulk.delete_jobs(
            self.api, parse.parse_caller(context), parse.parse_delete_jobs(request)
        )

    @rpc
    def cancelJobs(self, context: Any, request: Any) -> Any:
        cancelled = cancel.cancel_jobs(
            self.api, parse.parse_caller(context), parse.parse_cancel(request)
        )
        return pinlater.PinLaterCancelJobsResponse(cancelledJobDescriptors=cancelled)
