"""The supervisor of `pinledger serve --processes N`: starts N server processes (each
binds the shared Thrift port and its own peer and admin ports, and joins the owners'
group as a member of its own), starts again one that exits (backing off), stops them
all on SIGTERM or SIGINT, and exits non-zero when one keeps failing. It serves the
host's admin port itself (admin.py). It holds no partition and no Kafka or Postgres
connection: a worker is a whole `pinledger serve`."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pinledger
from pinledger.service.config import Config
from pinledger.service.listeners import PortInUseError, check_port_free
from pinledger.service.processes.admin import HostAdminServer
from pinledger.service.processes.merge import WorkerView
from pinledger.service.processes.plan import (
    RestartPolicy,
    Restarts,
    WorkerSpec,
    free_port,
    peer_port_of,
    worker_env,
    worker_server_id,
)
from pinledger.service.security import tls

log = logging.getLogger(__name__)

_POLL_S = 0.2
# The folder holding the `pinledger` package this supervisor runs from: the workers
# import the same one, whatever their working directory holds.
_IMPORT_ROOT = Path(pinledger.__file__).parents[1]


@dataclass
class _Slot:
    index: int
    restarts: Restarts
    spec: WorkerSpec | None = None
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    start_at: float = 0.0  # when to start it (again) while proc is None

    def view(self) -> WorkerView:
        spec = self.spec
        return WorkerView(
            index=self.index,
            pid=self.proc.pid if self.proc is not None and self.proc.poll() is None else None,
            admin_port=spec.admin_port if spec else 0,
            peer_port=spec.peer_port if spec else 0,
            restarts=self.restarts.total,
        )


def worker_command(index: int, verbose: bool) -> list[str]:
    """`pinledger serve` as worker `index` of this supervisor (-P: the package comes
    from PYTHONPATH, not from the working directory)."""
    return [
        sys.executable,
        "-P",
        "-m",
        "pinledger",
        *(["-v"] if verbose else []),
        "serve",
        "--worker",
        str(index),
        "--supervisor",
        str(os.getpid()),
    ]


class Supervisor:
    def __init__(
        self,
        config: Config,
        processes: int,
        verbose: bool = False,
        policy: RestartPolicy | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.verbose = verbose
        self._env = dict(os.environ if env is None else env)
        path = self._env.get("PYTHONPATH")
        self._env["PYTHONPATH"] = str(_IMPORT_ROOT) + (os.pathsep + path if path else "")
        self._slots = [_Slot(i, Restarts(policy or RestartPolicy())) for i in range(processes)]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # The workers' admin ports are reached here: the bind host, or loopback for all.
        self._local = "127.0.0.1" if config.host in ("0.0.0.0", "") else config.host
        self.admin = HostAdminServer(
            config.host,
            config.admin_port,
            self.views,
            self._local,
            config.metrics_token,
            tls=tls.admin_context(config),
            workers_tls=tls.own_context(config),
        )

    def views(self) -> list[WorkerView]:
        with self._lock:
            return [slot.view() for slot in self._slots]

    def _start(self, slot: _Slot) -> None:
        spec = WorkerSpec(
            index=slot.index,
            peer_port=peer_port_of(self.config.peer_port, slot.index, free_port(self._local)),
            admin_port=free_port(self._local),
            server_id=worker_server_id(self.config.server_id, slot.index),
            liveness_port=peer_port_of(self.config.liveness_port, slot.index, 0),
        )
        proc = subprocess.Popen(
            worker_command(slot.index, self.verbose), env=worker_env(self._env, spec)
        )
        with self._lock:
            slot.spec, slot.proc, slot.started_at = spec, proc, time.monotonic()
        log.info(
            "process %d started: pid %d, peer port %d, admin port %d",
            slot.index,
            proc.pid,
            spec.peer_port,
            spec.admin_port,
        )

    def _reap(self, slot: _Slot, now: float) -> bool:
        """A worker that exited: schedule its restart; False to give up."""
        assert slot.proc is not None
        code = slot.proc.returncode
        ran = now - slot.started_at
        with self._lock:
            slot.proc = None
        delay = slot.restarts.exited(ran)
        if delay is None:
            log.error(
                "process %d exited %d times in a row, each within %g s of its start "
                "(last exit status %d): giving up, stopping the others",
                slot.index,
                slot.restarts.failures,
                slot.restarts.policy.stable_after_s,
                code,
            )
            return False
        log.warning(
            "process %d (exit status %d after %.1f s): starting it again in %g s",
            slot.index,
            code,
            ran,
            delay,
        )
        slot.start_at = now + delay
        return True

    def run(self) -> int:
        """Until SIGTERM/SIGINT (0) or a worker that keeps failing (1)."""
        if not hasattr(socket, "SO_REUSEPORT"):
            log.error("this platform has no SO_REUSEPORT: processes cannot share a port")
            return 2
        try:
            # The workers share the port with each other, so none of them could tell a
            # sibling from a stranger already on it: the supervisor checks first.
            check_port_free(self.config.host, self.config.port)
        except PortInUseError as exc:
            log.error("%s", exc)
            return 2

        def stop(signum: int, _: Any) -> None:
            log.info("signal %d: stopping the server processes", signum)
            self._stop.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.admin.start()
        log.info(
            "pinledger supervisor: %d server processes on %s:%d, host admin http :%d",
            len(self._slots),
            self.config.host,
            self.config.port,
            self.admin.port,
        )
        failed = False
        try:
            for slot in self._slots:
                self._start(slot)
            while not failed and not self._stop.wait(_POLL_S):
                failed = not self._turn(time.monotonic())
        finally:
            self._stop_all()
            self.admin.stop()
        return 1 if failed else 0

    def _turn(self, now: float) -> bool:
        for slot in self._slots:
            exited = slot.proc is not None and slot.proc.poll() is not None
            if exited and not self._reap(slot, now):
                return False
            if slot.proc is None and now >= slot.start_at:
                self._start(slot)
        return True

    def _stop_all(self) -> None:
        procs = [slot.proc for slot in self._slots if slot.proc is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        # As long as a server's own stop may take (it hands its partitions back last).
        grace = self.config.stop_s
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("process pid %d did not stop in %g s: killing it", proc.pid, grace)
                proc.kill()
                proc.wait()


def die_with_supervisor(supervisor_pid: int) -> None:
    """In a worker: be sent SIGTERM when the supervisor dies (Linux), and stop at once
    if it is already gone (a worker without its supervisor would hold partitions that
    nothing restarts)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != supervisor_pid:
        raise SystemExit(f"pinledger: supervisor {supervisor_pid} is gone; not serving")


def run_processes(config: Config, processes: int, verbose: bool) -> int:
    return Supervisor(config, processes, verbose).run()


__all__ = ["Supervisor", "die_with_supervisor", "run_processes", "worker_command"]
