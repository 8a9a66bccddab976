"""The pinledger Python client: `PinLaterClient` for every PinLater method, and (in
client.worker) the `Worker` framework."""

from pinledger.client.client import PinLaterClient
from pinledger.client.errors import (
    ClientError,
    ErrorCode,
    JobCancelled,
    PinLaterError,
    ServerListError,
    ServerUnavailableError,
)
from pinledger.client.job_context import JobContext
from pinledger.client.jobs import (
    Ack,
    Checkpoint,
    DequeuedJob,
    Job,
    JobInfo,
    JobState,
    ScanPage,
    after_ms,
)
from pinledger.client.retry import RetryPolicy, constant, exponential, linear, never
from pinledger.client.servers import Address, ServerList
from pinledger.client.tls import Tls, TlsSettingsError
from pinledger.client.worker import Worker, worker_source

__all__ = [
    "Ack",
    "Address",
    "Checkpoint",
    "ClientError",
    "DequeuedJob",
    "ErrorCode",
    "Job",
    "JobCancelled",
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
    "Tls",
    "TlsSettingsError",
    "Worker",
    "after_ms",
    "constant",
    "exponential",
    "linear",
    "never",
    "worker_source",
]
