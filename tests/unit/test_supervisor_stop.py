"""`serve --processes`' supervisor gives each process as long as a server's own stop may
take (Config.stop_s) before it kills it: a process killed sooner would leave the owners'
group only at its session timeout, with a claim append maybe still in flight."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

from pinledger.service.config import Config
from pinledger.service.processes.supervisor import Supervisor

# A process that takes `delay` seconds to exit after SIGTERM (or ignores it: None).
_CHILD = """
import signal, sys, time
delay = {delay!r}
def stop(*_):
    if delay is None:
        return
    time.sleep(delay)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


@dataclasses.dataclass(frozen=True)
class _QuickStop(Config):
    """A configuration whose servers stop within `quick_stop_s`."""

    quick_stop_s: float = 1.0

    @property
    def stop_s(self) -> float:
        return self.quick_stop_s


def _child(delay: float | None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(delay=delay)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def _stop(stop_s: float, *delays: float | None) -> tuple[list[int | None], float]:
    supervisor = Supervisor(_QuickStop(admin_port=0, quick_stop_s=stop_s), len(delays))
    procs = [_child(delay) for delay in delays]
    try:
        for slot, proc in zip(supervisor._slots, procs, strict=True):
            slot.proc = proc
        began = time.monotonic()
        supervisor._stop_all()
        return [proc.returncode for proc in procs], time.monotonic() - began
    finally:
        supervisor.admin.stop()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def test_a_process_stopping_within_the_servers_stop_time_is_not_killed() -> None:
    codes, _ = _stop(3.0, 1.5, 0.2)
    assert codes == [0, 0]


def test_a_process_stopping_past_it_is_killed_once_it_has_passed() -> None:
    codes, took = _stop(1.0, None, 0.1)
    assert codes == [-9, 0]
    assert took >= 1.0


def test_the_stop_time_is_the_servers_own_bound() -> None:
    config = Config()
    # The calls in flight (35 s at the default append timeout), then the owner's
    # threads while the claims land (30 s), then leaving: what systemd and the chart
    # give a server too.
    assert config.stop_s == config.forward_timeout_s + max(config.claim_append_s, 25.0) + 5.0
    assert Config(append_timeout_s=40.0).stop_s > config.stop_s
