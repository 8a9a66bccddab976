"""A Worker's options: the checks that make a mistake fail when the Worker is made
rather than when it runs, and the worker's identity on the wire (`worker_source`)."""

from __future__ import annotations

import os
import socket


def worker_source(name: str) -> str:
    """A RequestContext.source unique to this process: `name:host:pid`."""
    return f"{name}:{socket.gethostname()}:{os.getpid()}"


def checked_heartbeat(
    *,
    concurrency: int,
    batch_size: int,
    claim_timeout_s: float,
    heartbeat_s: float | None,
    idle_backoff: tuple[float, float],
    grace_s: float,
    flush_timeout_s: float,
    use_processes: bool,
) -> float:
    """Raise on an option out of range; return the heartbeat interval (None: a third
    of the claim timeout; 0: no heartbeats)."""
    if use_processes:
        raise NotImplementedError(
            "use_processes: a Worker runs its handlers on threads; for CPU-bound jobs run "
            "`pinledger worker MODULE:HANDLER --processes N`, or several worker processes "
            "(each with its own worker_source)"
        )
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    if not 1 <= batch_size <= 1000:
        raise ValueError(f"batch_size must be between 1 and 1000, not {batch_size}")
    if claim_timeout_s <= 0:
        raise ValueError(f"claim_timeout_s must be positive, not {claim_timeout_s}")
    low, high = idle_backoff
    if not 0 < low <= high:
        raise ValueError(f"idle_backoff must be (min, max) with 0 < min <= max, not {idle_backoff}")
    if grace_s < 0 or flush_timeout_s < 0:
        raise ValueError("grace_s and flush_timeout_s cannot be negative")
    if heartbeat_s is None:
        heartbeat_s = claim_timeout_s / 3
    if heartbeat_s >= claim_timeout_s:
        raise ValueError(
            f"heartbeat_s ({heartbeat_s}) must be shorter than claim_timeout_s "
            f"({claim_timeout_s}), or 0 for no heartbeats"
        )
    return max(heartbeat_s, 0.0)


__all__ = ["checked_heartbeat", "worker_source"]
