"""The pure parts of the supervisor: what each worker is started with, and when a
worker that exited is started again or given up on."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """One start of worker `index`: a fresh spec (fresh free ports) on each restart."""

    index: int
    peer_port: int
    admin_port: int
    server_id: str
    # 0: the worker's OS picks it.
    liveness_port: int = 0


def worker_env(base: Mapping[str, str], spec: WorkerSpec) -> dict[str, str]:
    """The worker's environment: the supervisor's, with the settings that make it one
    process of N (it serves alone: PROCESSES=1; its own peer and admin ports and id).
    Environment variables win over a config file, so these hold whatever the file says."""
    return {
        **base,
        "PINLEDGER_PROCESSES": "1",
        "PINLEDGER_PEER_PORT": str(spec.peer_port),
        "PINLEDGER_ADMIN_PORT": str(spec.admin_port),
        "PINLEDGER_LIVENESS_PORT": str(spec.liveness_port),
        "PINLEDGER_SERVER_ID": spec.server_id,
    }


def worker_server_id(server_id: str, index: int) -> str:
    """Distinct per worker (claims and records name the server), stable over restarts."""
    return f"{server_id}/{index}"


def peer_port_of(base_port: int, index: int, pick: int) -> int:
    """Worker `index`'s peer port: base + index when a base is set, else `pick` (a
    free port the OS chose)."""
    return base_port + index if base_port else pick


def free_port(host: str) -> int:
    """A port free on `host` now (the worker binds it a moment later; a port taken in
    between makes that start fail, and the supervisor starts it again)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    # A worker that ran this long before exiting had started fine: its failures so far
    # are forgotten.
    stable_after_s: float = 30.0
    # This many exits in a row, each before stable_after_s: the worker cannot run here
    # (a bad setting, a dependency gone): the supervisor stops and exits non-zero.
    give_up_after: int = 5


class Restarts:
    """One worker's restart history under a policy."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self.failures = 0  # exits in a row, each soon after its start
        self.total = 0  # every restart, for the health page

    def exited(self, ran_for_s: float) -> float | None:
        """The worker exited after `ran_for_s`: the delay before starting it again, or
        None to give up."""
        if ran_for_s >= self.policy.stable_after_s:
            self.failures = 0
        self.failures += 1
        if self.failures >= self.policy.give_up_after:
            return None
        self.total += 1
        delay = self.policy.first_delay_s * 2 ** (self.failures - 1)
        return float(min(self.policy.max_delay_s, delay))
