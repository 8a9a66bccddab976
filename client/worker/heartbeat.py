"""Heartbeats: every `interval_s` one checkpointJobs call renews the claim of every job
the worker holds (dequeued, not yet acked or released), so a job may run longer than
the server's claim timeout. A heartbeat that fails is logged and the next one tries
again; the claims expire `claim_timeout_s` after the last one that reached the server.
"""

from __future__ import annotations

import logging
import threading

from pinledger.client.errors import ClientError, JobCancelled
from pinledger.client.jobs import Checkpoint
from pinledger.client.worker.outbox import Outbox
from pinledger.client.worker.ports import Sender
from pinledger.ledger.clock import Clock

log = logging.getLogger("pinledger.worker")


def beat(client: Sender, queue: str, outbox: Outbox, name: str, claim_timeout_s: float) -> None:
    """One heartbeat of every held claim (none sent when nothing is held)."""
    held = outbox.held()
    if not held:
        return
    try:
        client.checkpoint(queue, [Checkpoint(d) for d in held])
    except JobCancelled as exc:
        # The other claims were renewed; the handlers of these hear it at their next
        # JobContext.checkpoint() (or see `JobContext.cancelled`).
        outbox.cancelled(exc.descriptors)
        log.info("%s: jobs cancelled by an operator: %s", name, ", ".join(exc.descriptors))
    except ClientError as exc:
        log.warning(
            "%s: heartbeat of %d jobs failed: %s; their claims expire %g s after "
            "the last heartbeat that reached the server",
            name,
            len(held),
            exc,
            claim_timeout_s,
        )


def heartbeat_thread(
    client: Sender,
    queue: str,
    outbox: Outbox,
    *,
    interval_s: float,
    claim_timeout_s: float,
    clock: Clock,
    done: threading.Event,
    name: str,
) -> threading.Thread:
    """A daemon thread (not started) that beats every `interval_s` until `done` is set."""

    def heartbeats() -> None:
        while not clock.sleep(interval_s, interrupt=done):
            beat(client, queue, outbox, name, claim_timeout_s)

    return threading.Thread(target=heartbeats, name=f"{name}-hb", daemon=True)


__all__ = ["beat", "heartbeat_thread"]
