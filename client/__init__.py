"""The pinledger Python client: `PinLaterClient` for every PinLater method, and (in
client.worker) the `Worker` framework."""

from client.client import PinLaterClient
from client.errors import (
    ClientError,
    ErrorCode,
    PinLaterError,
    ServerListError,
    ServerUnavailableError,
)
from client.job_context import JobContext
from client.jobs import Ack, Checkpoint, DequeuedJob, Job, JobInfo, JobState, ScanPage, after_ms
from client.retry import RetryPolicy, constant, exponential, linear, never
from client.servers import Address, ServerList
from client.worker import Worker, worker_source

__all__ = [
    "Ack",
    "Address",
    "Checkpoint",
    "ClientError",
    "DequeuedJob",
    "ErrorCode",
    "Job",
    "JobContext",
    "JobInfo",
    "JobState",
    "PinLaterClient",
    "PinLaterError",
    "RetryPolicy",
    "ScanPage",
    "ServerList",
    "ServerListError",
    "ServerUnavailableError",
    "Worker",
    "after_ms",
    "constant",
    "exponential",
    "linear",
    "never",
    "worker_source",
]
