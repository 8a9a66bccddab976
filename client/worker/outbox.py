"""The worker's outbox: the acks and checkpoints waiting to be sent, the claims the
worker still holds, and the calls that send them.

Order matters: checkpoints go first (a `never` failure lowers the job's budget before
its failure ack), and an ack never leaves ahead of its own job's checkpoint. Acks ride
on the next dequeue when there is one (the loop takes them with `take_acks`); otherwise
`send_acks` sends them by ackDequeuedJobs. A call that fails keeps what it carried, to
be sent again: acks are safe to repeat, the ledger rejects one that already applied.

Locking: the outbox has a lock of its own, taken innermost. The Worker may call into
the outbox while holding its own lock (to record an outcome atomically with its
shutdown bookkeeping, or to test "is there anything to send" before it waits), never
the other way round: nothing here calls out while holding the outbox lock, and the
network calls run outside it. The outbox has no condition: the only thread that waits
for what it holds is the Worker's loop, and it waits on the Worker's condition, which
the Worker notifies when it records an outcome (under its lock, so no wakeup is lost).
Checkpoints and acks are sent by one thread at a time (the loop's, then at shutdown
the same thread), which `send_checkpoints` relies on. A plain lock is enough: the
signal handlers (signals.py), which may run on a thread inside this lock, never touch
the outbox.
"""

from __future__ import annotations

import logging
import threading

from pinledger.client.errors import ClientError, JobCancelled
from pinledger.client.jobs import Ack, Checkpoint
from pinledger.client.worker.ports import Sender
from pinledger.ledger.clock import Clock

log = logging.getLogger("pinledger.worker")

# How long acks may wait for a dequeue to ride on while every thread is busy.
MAX_ACK_DELAY_S = 1.0
# The pause after a failed call, doubling up to the maximum.
ERROR_BACKOFF = (0.2, 10.0)

PendingAck = tuple[bool, Ack]
"""(succeeded, ack): which list of the dequeue or ack call it goes in."""


class Outbox:
    """Pending checkpoints and acks of one worker's queue, and its held claims."""

    def __init__(
        self,
        client: Sender,
        queue: str,
        *,
        batch_size: int,
        clock: Clock,
        name: str,
    ) -> None:
        self.client = client
        self.queue = queue
        self.batch_size = batch_size
        self.clock = clock
        self.name = name
        self._lock = threading.Lock()
        # Claims the worker still holds: dequeued, and no ack or release sent yet.
        self._held: set[str] = set()
        self._checkpoints: list[tuple[Checkpoint, bool]] = []  # (checkpoint, ends the claim)
        self._acks: list[PendingAck] = []
        self._oldest_ack: float | None = None
        # Held jobs a checkpoint heard were cancelled (decision 0036): no longer held,
        # never acked; kept until their run ends (`finished_cancelled`).
        self._cancelled: set[str] = set()

    # ---- what goes in ----

    def hold(self, descriptors: list[str]) -> None:
        """Claims just dequeued."""
        with self._lock:
            self._held.update(descriptors)

    def add(self, *, ack: PendingAck | None, checkpoint: Checkpoint | None) -> None:
        """One finished run's ack and/or checkpoint; a checkpoint with no ack ends the
        claim."""
        with self._lock:
            if checkpoint is not None:
                self._checkpoints.append((checkpoint, ack is None))
            if ack is not None:
                if not self._acks:
                    self._oldest_ack = self.clock.monotonic()
                self._acks.append(ack)

    def cancelled(self, descriptors: list[str]) -> None:
        """Jobs the server said were cancelled: their claims are gone, so they are no
        longer held, and their pending acks and checkpoints are dropped (the server would
        answer them as cancelled again, or reject them)."""
        gone = set(descriptors)
        with self._lock:
            self._cancelled.update(gone & self._held)
            self._held.difference_update(gone)
            self._acks = [a for a in self._acks if a[1].descriptor not in gone]
            self._oldest_ack = self._oldest_ack if self._acks else None
            self._checkpoints = [c for c in self._checkpoints if c[0].descriptor not in gone]

    def is_cancelled(self, descriptor: str) -> bool:
        with self._lock:
            return descriptor in self._cancelled

    def finished_cancelled(self, descriptor: str) -> bool:
        """The run of a job ended: True (and forgotten) when it had been cancelled, so
        that its outcome is not sent."""
        with self._lock:
            if descriptor in self._cancelled:
                self._cancelled.discard(descriptor)
                return True
            return False

    def release(self, descriptor: str) -> None:
        """Hand a claim back: to PENDING, due now, no attempt used."""
        with self._lock:
            self._checkpoints.append((Checkpoint(descriptor, move_to_pending=True), True))

    # ---- what the loop asks ----

    def held(self) -> list[str]:
        with self._lock:
            return sorted(self._held)

    def has_checkpoints(self) -> bool:
        with self._lock:
            return bool(self._checkpoints)

    def has_acks(self) -> bool:
        with self._lock:
            return bool(self._acks)

    def acks_due(self) -> bool:
        """Enough acks for a batch, or the oldest has waited MAX_ACK_DELAY_S."""
        with self._lock:
            if not self._acks or self._oldest_ack is None:
                return False
            return (
                len(self._acks) >= self.batch_size
                or self.clock.monotonic() - self._oldest_ack >= MAX_ACK_DELAY_S
            )

    def take_acks(self) -> list[PendingAck]:
        """The acks that may go now: not those of a job whose checkpoint is still to
        be sent (it must reach the server first)."""
        with self._lock:
            first = {c.descriptor for c, _ in self._checkpoints}
            acks = [a for a in self._acks if a[1].descriptor not in first]
            self._acks = [a for a in self._acks if a[1].descriptor in first]
            self._oldest_ack = self.clock.monotonic() if self._acks else None
            return acks

    def put_back(self, acks: list[PendingAck]) -> None:
        """Acks whose call failed, to be sent again first."""
        if acks:
            with self._lock:
                self._acks[:0] = acks
                self._oldest_ack = self.clock.monotonic()

    def acks_sent(self, acks: list[PendingAck]) -> None:
        """Acks that reached the server: their claims are no longer held."""
        if acks:
            with self._lock:
                self._held.difference_update(a.descriptor for _, a in acks)

    # ---- sending ----

    def send_acks(self) -> bool:
        """Pending acks by ackDequeuedJobs; False (acks kept) when the call failed."""
        acks = self.take_acks()
        if not acks:
            return True
        try:
            self.client.ack(
                self.queue,
                succeeded=[a for ok, a in acks if ok],
                failed=[a for ok, a in acks if not ok],
            )
        except ClientError as exc:
            self.put_back(acks)
            log.warning(
                "%s: sending %d acks failed: %s; they are kept and sent again",
                self.name,
                len(acks),
                exc,
            )
            return False
        self.acks_sent(acks)
        return True

    def send_checkpoints(self) -> bool:
        """Pending checkpoints by checkpointJobs; False (kept) when the call failed."""
        with self._lock:
            batch = list(self._checkpoints)
        if not batch:
            return True
        try:
            self.client.checkpoint(self.queue, [c for c, _ in batch])
        except JobCancelled as exc:
            # The others' checkpoints were appended; the cancelled jobs' are moot.
            with self._lock:
                del self._checkpoints[: len(batch)]
                self._held.difference_update(c.descriptor for c, ends in batch if ends)
            self.cancelled(exc.descriptors)
            log.info("%s: jobs cancelled by an operator: %s", self.name, ", ".join(exc.descriptors))
            return True
        except ClientError as exc:
            log.warning(
                "%s: sending %d checkpoints failed: %s; they are kept and sent again",
                self.name,
                len(batch),
                exc,
            )
            return False
        with self._lock:
            # Only one thread sends, so the batch is still the list's head.
            del self._checkpoints[: len(batch)]
            self._held.difference_update(c.descriptor for c, ends in batch if ends)
        return True

    def flush(self) -> bool:
        """Send every pending checkpoint, then every pending ack; True when all went."""
        return self.send_checkpoints() and self.send_acks()

    def flush_all(self, timeout_s: float, claim_timeout_s: float) -> None:
        """Flush, retrying with a growing pause for up to `timeout_s`; then log the
        claims left to expire."""
        deadline = self.clock.monotonic() + timeout_s
        pause = ERROR_BACKOFF[0]
        while not self.flush():
            if self.clock.monotonic() + pause > deadline:
                lost = self.held()
                log.error(
                    "%s: could not reach the server for %g s: %d jobs keep their claims "
                    "until the claim timeout (%g s), then run again: %s",
                    self.name,
                    timeout_s,
                    len(lost),
                    claim_timeout_s,
                    ", ".join(lost[:20]),
                )
                return
            self.clock.sleep(pause)
            pause = min(pause * 2, ERROR_BACKOFF[1])


__all__ = ["ERROR_BACKOFF", "MAX_ACK_DELAY_S", "Outbox", "PendingAck"]
