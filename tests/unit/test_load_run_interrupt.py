"""`pinledger client --mode enqueue --num_queries -1` ends on Ctrl-C with its summary,
wherever the signal lands: a KeyboardInterrupt raised inside Event.wait could leave the
event's lock held and hang the run for good (it did in CI); the signal now only sets
the run's stop."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Sequence

from pinledger.cli.load_run import LoadRun
from pinledger.cli.tool_options import parse_options
from pinledger.client.jobs import Job


class Servers:
    def current(self) -> list[str]:
        return ["127.0.0.1:9010"]


class Enqueues:
    """Answers each enqueue at once, as a fast server would."""

    servers = Servers()

    def __init__(self) -> None:
        self.calls = 0

    def enqueue(self, queue: str, jobs: Sequence[Job]) -> list[str]:
        self.calls += 1
        time.sleep(0.001)
        return [f"{queue}:s0:p1:{self.calls}"] * len(jobs)


def test_ctrl_c_ends_an_endless_run_with_its_summary() -> None:
    client = Enqueues()
    options = parse_options(
        ["--mode", "enqueue", "--queue", "q", "--num_queries", "-1", "--concurrency", "4"]
    )
    out = io.StringIO()
    run = LoadRun(client, options, out)  # type: ignore[arg-type]
    # Ctrl-C at a moment unrelated to the run's own one-second ticks.
    timer = threading.Timer(1.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    previous = signal.getsignal(signal.SIGINT)
    timer.start()
    started = time.monotonic()
    assert run.run() == 0
    assert time.monotonic() - started < 10
    assert signal.getsignal(signal.SIGINT) is previous  # the handler was put back
    text = out.getvalue()
    assert "interrupted: " in text
    assert f"summary: enqueue {client.calls:,} calls" in text
