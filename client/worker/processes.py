"""`pinledger worker ... --processes N`: N worker processes on one host, for handlers
that hold the interpreter lock (CPU-bound work), where threads would take turns.

The parent runs no handler. It starts each child as `pinledger worker` with the same
options (so each is a worker of its own: its own source, its own claims and acks),
starts again one that dies (a second later, with one line saying how it ended; one
that refused its options, exit 2, stops them all with exit 2, as a restart would only
fail again), and on
SIGTERM or SIGINT passes the signal on, so that each child stops as one worker does:
its running jobs get `--grace-s`, a second signal hands them back at once. It waits
`--grace-s` plus `FLUSH_S` for them, then kills what is left. The children are in a
session of their own, so a terminal's Ctrl-C reaches them once, through the parent; and
each stops when the parent is gone (`--parent`: it checks every second).

With `--status-port`, the parent answers for all: /health is 200 when every child
answers 200 (the body shows each), /metrics is the children's, each series labelled
`process="i"` (pinledger/exposition.py). Each child serves its own status on a free
port of 127.0.0.1 and writes the port to a file the parent reads.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pinledger.client.worker.signals import install_stop_signals
from pinledger.client.worker.status import JSON, PROMETHEUS, Routes
from pinledger.exposition import merge_prometheus

log = logging.getLogger("pinledger.worker")

# After --grace-s, how long the children have to send their last acks and exit.
FLUSH_S = 15.0
# How long a child that died waits before it is started again.
RESTART_S = 1.0
# A child's status, asked by the parent's /health and /metrics.
ASK_TIMEOUT_S = 2.0


# A child's exit status for options it cannot use (runner.py): starting it again would
# only fail again.
USAGE_EXIT = 2


class ChildRefusedError(Exception):
    """A child exited refusing its options."""


@dataclass
class Child:
    index: int
    port_file: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    died_at: float | None = None

    def port(self) -> int | None:
        try:
            return int(self.port_file.read_text())
        except (OSError, ValueError):
            return None  # not serving yet


def _ask(port: int | None, path: str) -> tuple[int, str]:
    if port is None:
        return 0, "starting"
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{path}", timeout=ASK_TIMEOUT_S
        ) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return int(refused.code), refused.read().decode()
    except OSError as exc:
        return 0, f"no answer: {exc}"


class Supervisor:
    """Starts `processes` children `pinledger worker <child_arguments>` and keeps them
    running until a signal stops them."""

    def __init__(self, child_arguments: list[str], processes: int, grace_s: float) -> None:
        self._arguments = child_arguments
        self._grace_s = grace_s
        self._folder = Path(tempfile.mkdtemp(prefix="pinledger-worker-"))
        self.children = [Child(i, self._folder / f"port-{i}") for i in range(processes)]
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    # ---- the children ----

    def _start(self, child: Child) -> None:
        child.port_file.unlink(missing_ok=True)
        command = [
            *(sys.executable, "-m", "pinledger", "worker", *self._arguments),
            *("--status-host", "127.0.0.1", "--status-port", "0"),
            *("--port-file", str(child.port_file), "--parent", str(os.getpid())),
        ]
        child.process = subprocess.Popen(command, start_new_session=True)
        child.died_at = None
        log.info("worker process %d started (pid %d)", child.index, child.process.pid)

    def _watch(self) -> None:
        """Start again the children that died while the supervisor serves."""
        now = time.monotonic()
        for child in self.children:
            if child.process is None or child.process.poll() is None:
                continue
            if child.process.returncode == USAGE_EXIT:
                raise ChildRefusedError(
                    f"worker process {child.index} refused its options (exit "
                    f"{USAGE_EXIT}): its message is above; stopping the others"
                )
            if child.died_at is None:
                child.died_at = now
                log.warning(
                    "worker process %d (pid %d) exited with %s; it starts again in %g s",
                    child.index,
                    child.process.pid,
                    child.process.returncode,
                    RESTART_S,
                )
            elif now - child.died_at >= RESTART_S:
                child.restarts += 1
                self._start(child)

    def run(self) -> int:
        """Supervise until stopped; 0 once every child has exited."""
        restore = self._install_signals()
        try:
            with self._lock:
                for child in self.children:
                    self._start(child)
            try:
                while not self._stopping.wait(0.2):
                    with self._lock:
                        self._watch()
            except ChildRefusedError as exc:
                log.error("%s", exc)
                self.stop()
                self._wait_for_children()
                return USAGE_EXIT
            return self._wait_for_children()
        finally:
            restore()
            for child in self.children:
                child.port_file.unlink(missing_ok=True)
            self._folder.rmdir()

    def _wait_for_children(self) -> int:
        deadline = time.monotonic() + self._grace_s + FLUSH_S
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning(
                    "worker process %d still running %g s after the stop: killed",
                    child.index,
                    self._grace_s + FLUSH_S,
                )
                child.process.kill()
                child.process.wait()
        log.info("every worker process stopped")
        return 0

    # ---- signals ----

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Pass `signum` on to every child (a second time: they hand back their jobs)."""
        self._stopping.set()
        with self._lock:
            for child in self.children:
                if child.process is not None and child.process.poll() is None:
                    child.process.send_signal(signum)

    def _install_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT passed on to the children, as a worker takes them: the
        first stops, a second hands the running jobs back (signals.py). On a thread of
        its own: the handler may have interrupted the main thread inside `_lock`."""

        def passing(signum: int) -> Callable[[], None]:
            return lambda: threading.Thread(target=self.stop, args=(signum,), daemon=True).start()

        return install_stop_signals(
            "worker processes",
            self._grace_s,
            stopping=self._stopping,
            stop=passing(signal.SIGTERM),
            stop_now=passing(signal.SIGINT),
        )

    # ---- status ----

    def routes(self) -> Routes:
        return {"/health": self._health, "/metrics": self._metrics}

    def _health(self) -> tuple[int, str, str]:
        processes: dict[str, object] = {}
        ok = not self._stopping.is_set()
        for child in self.children:
            process = child.process
            alive = process is not None and process.poll() is None
            code, text = _ask(child.port(), "/health") if alive else (0, "exited")
            try:
                answer: object = json.loads(text)
            except ValueError:
                answer = text
            processes[str(child.index)] = {
                "pid": process.pid if process is not None else None,
                "restarts": child.restarts,
                "health": answer,
            }
            ok = ok and code == 200
        body = {"status": "ok" if ok else "failing", "processes": processes}
        return (200 if ok else 503), JSON, json.dumps(body) + "\n"

    def _metrics(self) -> tuple[int, str, str]:
        texts = {}
        for child in self.children:
            code, text = _ask(child.port(), "/metrics")
            if code == 200:
                texts[child.index] = text
        return 200, PROMETHEUS, merge_prometheus(texts)
