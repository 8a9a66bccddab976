"""`python -m bench.call_profile`: where one phase of the benchmark spends the server's
CPU, per call. Starts a server as `python -m bench` does, runs one phase's load
(`--phase enqueue1|enqueue100|complete1|complete50`) and reports, from /proc, the
server's CPU per call (user and kernel) and its threads' context switches per call,
grouped by thread name (librdkafka names its threads; Python's all read "python"),
optionally with a py-spy profile of the same window (`--spy DIR`, `--gil` for only the
samples that hold the interpreter lock).

    python -m bench.call_profile --phase enqueue1 --calls 6000
    python -m bench.call_profile --phase complete1 --spy /tmp/prof --gil

Issue 22 asks for this before each change: a profile and the switch count, so that an
A/B can say what moved.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench import cpu
from bench import pinledger_load as load
from bench.__main__ import bench_server, cleanup
from pinledger.projections.dsn import is_mysql
from pinledger.service.config import Config
from pinledger.service.testing.servers import running

PHASES = ("enqueue1", "enqueue100", "complete1", "complete50")
_BATCH = {"complete1": 1, "complete50": 50}
_DEFAULT_CALLS = {"enqueue1": 6000, "enqueue100": 600, "complete1": 6000, "complete50": 400}
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class Threads:
    """Per thread name: CPU clock ticks (user, kernel) and switches (voluntary, not)."""

    user: Counter[str] = field(default_factory=Counter)
    kernel: Counter[str] = field(default_factory=Counter)
    voluntary: Counter[str] = field(default_factory=Counter)
    involuntary: Counter[str] = field(default_factory=Counter)


# A thread's name and counters: user and kernel ticks, voluntary and other switches.
Task = tuple[str, int, int, int, int]
# Python's threads all read "python"; those started during the window are the
# connections' threads (one per client connection).
NEW = " (started in the window)"


def read_tasks(pid: int) -> dict[int, Task]:
    """Every thread of `pid` and its children (serve --processes), by thread id."""
    found: dict[int, Task] = {}
    for proc in _tree(pid):
        for task in Path(f"/proc/{proc}/task").glob("*"):
            try:
                stat = (task / "stat").read_text()
                status = (task / "status").read_text()
            except OSError:
                continue  # a thread that ended meanwhile
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            name = name.rstrip("0123456789") or name  # rdk:broker1 and rdk:broker2 alike
            fields = stat[stat.rindex(")") + 2 :].split()
            switches = {
                key: int(value)
                for key, _, value in (line.partition(":\t") for line in status.splitlines())
                if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
            }
            found[int(task.name)] = (
                name,
                int(fields[11]),
                int(fields[12]),
                switches.get("voluntary_ctxt_switches", 0),
                switches.get("nonvoluntary_ctxt_switches", 0),
            )
    return found


@contextmanager
def sampled(pid: int, into: Threads, every_s: float = 0.05) -> Iterator[None]:
    """What the threads of `pid` spent during the block, into `into`. Sampled every
    `every_s`: a connection's thread ends when the load closes it, and /proc forgets
    it then, so its last sample stands for it."""
    first = read_tasks(pid)
    last = dict(first)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every_s):
            last.update(read_tasks(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield
    finally:
        stop.set()
        sampler.join()
        last.update(read_tasks(pid))
    for tid, (named, user, kernel, vol, invol) in last.items():
        _, user0, kernel0, vol0, invol0 = first.get(tid, (named, 0, 0, 0, 0))
        name = named if tid in first else named + NEW
        into.user[name] += user - user0
        into.kernel[name] += kernel - kernel0
        into.voluntary[name] += vol - vol0
        into.involuntary[name] += invol - invol0


def _tree(pid: int) -> list[int]:
    pids = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        pids.extend(_tree(int(child)))
    return pids


@contextmanager
def spying(pid: int, directory: str | None, gil: bool, phase: str) -> Iterator[None]:
    if directory is None:
        yield
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    out = Path(directory) / f"{phase}.collapsed.txt"
    command = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "250"]
    command += ["--threads", "--nonblocking", "--output", str(out)]
    if gil:
        command.append("--gil")
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(2)
        spy.wait(timeout=60)
        print(f"py-spy profile: {out}", file=sys.stderr)


def run_phase(port: int, queue: str, args: argparse.Namespace) -> None:
    """The measured load: `args.calls` calls of the phase."""
    if args.phase.startswith("enqueue"):
        per_call = 1 if args.phase == "enqueue1" else 100
        load.enqueue(port, queue, args.calls * per_call, per_call, args.concurrency, args.phase)
    else:
        batch = _BATCH[args.phase]
        load.complete(port, queue, args.calls * batch, batch, args.concurrency, args.phase)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.call_profile")
    parser.add_argument("--phase", choices=PHASES, default="enqueue1")
    parser.add_argument(
        "--calls",
        type=int,
        help="calls in the measured window (default: 6,000; 600 of 100 jobs; 400 of 50)",
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--spy", metavar="DIR", help="also record py-spy into DIR")
    parser.add_argument("--gil", action="store_true", help="py-spy: only samples holding the GIL")
    args = parser.parse_args(argv)
    if args.calls is None:
        # About the same jobs per phase as the benchmark's quick run: a backlog of
        # 6,000 calls of 50 jobs would outrun the projection the prefill waits for.
        args.calls = _DEFAULT_CALLS[args.phase]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = Config.from_env()
    server = bench_server(config, "prof", args.partitions)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="pinledger-prof-") as logs,
            running([server], Path(logs)),
        ):
            assert server.proc is not None
            queue = load.create_queue(server.port)
            load.enqueue(server.port, queue, 400, 1, args.concurrency, "warm-up")
            if args.phase in _BATCH:
                jobs = args.calls * _BATCH[args.phase]
                load.prefill(server.port, queue, jobs + 400, "prefill")
                load.complete(server.port, queue, 400, 1, args.concurrency, "warm-up")
            database, database_ticks = cpu.store(is_mysql(config.store_url))
            others = {"kafka (broker JVM)": cpu.kafka(), database: database_ticks}
            spent, before_others = Threads(), _ticks(others)
            with (
                sampled(server.proc.pid, spent),
                spying(server.proc.pid, args.spy, args.gil, args.phase),
            ):
                run_phase(server.port, queue, args)
            outside = _ticks(others) - before_others
    finally:
        cleanup(config, server)
    report(spent, outside, args.calls, args)
    return 0


def _ticks(groups: dict[str, cpu.Group]) -> Counter[str]:
    stats = cpu.read_stats()
    return Counter({name: group(stats) or 0 for name, group in groups.items()})


def report(spent: Threads, outside: Counter[str], calls: int, args: argparse.Namespace) -> None:
    print(
        f"\n{args.phase}: {calls:,} calls, {args.concurrency} client threads, server on "
        f"{Config.from_env().kafka_client}"
    )
    print(
        f"{'threads':<24}{'user us/call':>14}{'kernel us/call':>16}{'vol sw/call':>13}"
        f"{'invol sw/call':>15}"
    )
    names = sorted(
        set(spent.user) | set(spent.voluntary), key=lambda n: -(spent.user[n] + spent.kernel[n])
    )
    for name in [*names, "total"]:
        if name == "total":
            user, kernel = sum(spent.user.values()), sum(spent.kernel.values())
            vol, invol = sum(spent.voluntary.values()), sum(spent.involuntary.values())
        else:
            user, kernel = spent.user[name], spent.kernel[name]
            vol, invol = spent.voluntary[name], spent.involuntary[name]
        us = _TICK_S / calls * 1e6
        print(
            f"{name:<32}{user * us:>14.1f}{kernel * us:>16.1f}"
            f"{vol / calls:>13.2f}{invol / calls:>15.2f}"
        )
    for name, ticks in outside.items():
        print(f"{name:<48}{ticks * _TICK_S / calls * 1e6:>14.1f} us/call (user + kernel)")


if __name__ == "__main__":
    sys.exit(main())
