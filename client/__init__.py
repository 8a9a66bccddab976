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
from client.jobs import Ack, Checkpoint, DequeuedJob, Job, JobInfo, JobState, ScanPage, after_ms
from client.servers import Address, ServerList

__all__ = [
    "Ack",
    "Address",
    "Checkpoint",
    "ClientError",
    "DequeuedJob",
    "ErrorCode",
    "Job",
    "JobInfo",
    "JobState",
    "PinLaterClient",
    "PinLaterError",
    "ScanPage",
    "ServerList",
    "ServerListError",
    "ServerUnavailableError",
    "after_ms",
]
