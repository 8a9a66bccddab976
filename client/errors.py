"""What the client raises: a PinLater error with its ErrorCode, or a transport failure."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """PinLater's ErrorCode (thrift/pinlater.thrift), same numbers."""

    CONTINUATION_INVALID = 400
    PASSWORD_INVALID = 403
    QUEUE_NAME_INVALID = 410
    QUEUE_NAME_TOO_LONG = 411
    QUEUE_NOT_FOUND = 413
    PRIORITY_NOT_SUPPORTED = 416
    DEQUEUE_RATE_LIMITED = 429
    ENQUEUE_REJECTED = 430
    UNKNOWN = 500
    NO_HEALTHY_SHARDS = 501
    SHARD_CONNECTION_FAILED = 502


# Codes that say "the storage behind the server was unavailable": a call that is safe to
# repeat may be repeated on another server.
TRANSIENT_CODES = frozenset({ErrorCode.NO_HEALTHY_SHARDS, ErrorCode.SHARD_CONNECTION_FAILED})


class ClientError(Exception):
    """Base of everything the client raises."""


class PinLaterError(ClientError):
    """The server refused the call; `code` is PinLater's ErrorCode."""

    def __init__(self, code: ErrorCode, message: str, server: str = "") -> None:
        self.code = code
        self.message = message
        self.server = server
        where = f" (from {server})" if server else ""
        super().__init__(f"{code.name}: {message}{where}")

    @property
    def transient(self) -> bool:
        return self.code in TRANSIENT_CODES


class JobCancelled(PinLaterError):  # noqa: N818 - news for a handler, not a fault
    """checkpointJobs named jobs an operator cancelled (cancelJobs, decision 0036):
    `descriptors` says which. Their work should stop; they must not be acked (the job is
    FAILED already, with the cancel in its custom status). A worker's handler gets it from
    `JobContext.checkpoint()` or `heartbeat()`, and may catch it to clean up."""

    def __init__(self, descriptors: list[str], message: str, server: str = "") -> None:
        super().__init__(ErrorCode.UNKNOWN, message, server)
        self.descriptors = descriptors


class ServerUnavailableError(ClientError):
    """No server answered: every address was tried (with retries for calls that are safe
    to repeat). The message lists the addresses and the last failure."""


class ServerListError(ClientError):
    """The server list is empty or malformed; the message names the file and line."""
