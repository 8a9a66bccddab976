"""What the worker needs of the client: PinLaterClient is one, a test's fake server
another. Every call raises ClientError when it failed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pinledger.client.jobs import Ack, Checkpoint, DequeuedJob


class Sender(Protocol):
    """The two calls the outbox and the heartbeat make."""

    def ack(
        self, queue: str, succeeded: Iterable[Ack] = (), failed: Iterable[Ack] = ()
    ) -> None: ...

    def checkpoint(self, queue: str, checkpoints: Iterable[Checkpoint]) -> None: ...


class WorkerClient(Sender, Protocol):
    """Everything a Worker calls: the dequeue that acks ride on, and the Sender calls."""

    def dequeue(
        self,
        queue: str,
        limit: int,
        *,
        succeeded: Iterable[Ack] = (),
        failed: Iterable[Ack] = (),
    ) -> list[DequeuedJob]: ...


__all__ = ["Sender", "WorkerClient"]
