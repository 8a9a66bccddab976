"""CPU per job, read from /proc: the cost of a job on a shared machine, beside its
throughput (issue 14, lever 6).

A `Meter` names process groups (the pinledger server, the bench process, every
Postgres process or, on the MySQL store, every MariaDB/MySQL server process, the Kafka
JVM, River's bench) and samples their CPU ticks
(utime + stime); a `Window` takes one sample when a timed phase starts and one when it
ends. A group is a process tree: the live processes' own ticks plus what each has
collected from children it reaped (cutime + cstime), so a Postgres backend that exits
during the window still counts, through the postmaster. The machine's busy ticks
(/proc/stat) give what no group accounts for: other sessions, the kernel, tools.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
REST = "rest of the machine (not in total)"
POSTGRES = "postgres (every process)"
MYSQL = "mariadb/mysql (every mariadbd, mysqld)"


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of /proc/<pid>/stat the meter reads (proc(5)); times in ticks."""

    pid: int
    comm: str
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int

    @property
    def own(self) -> int:
        return self.utime + self.stime

    @property
    def reaped(self) -> int:
        return self.cutime + self.cstime


def parse_stat(text: str) -> ProcStat:
    """One /proc/<pid>/stat line. The command name is in parentheses and may itself
    hold spaces and parentheses, so the fields after it are split from the last ')'."""
    open_at, close_at = text.index("("), text.rindex(")")
    rest = text[close_at + 1 :].split()
    # rest[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
    return ProcStat(
        pid=int(text[:open_at]),
        comm=text[open_at + 1 : close_at],
        ppid=int(rest[1]),
        utime=int(rest[11]),
        stime=int(rest[12]),
        cutime=int(rest[13]),
        cstime=int(rest[14]),
    )


def parse_machine(text: str) -> int:
    """Busy ticks of all CPUs from /proc/stat's first line: everything but idle and
    iowait (guest time is already inside user and nice)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
            steal = fields[7] if len(fields) > 7 else 0
            return user + nice + system + irq + softirq + steal
    raise ValueError("no 'cpu' line in /proc/stat")


def read_stats(proc: Path = PROC) -> dict[int, ProcStat]:
    """Every process's stat; a process that exits while being read is skipped."""
    stats: dict[int, ProcStat] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stats[int(entry.name)] = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
    return stats


def descendants(roots: set[int], stats: Mapping[int, ProcStat]) -> set[int]:
    """`roots` and every live process below them."""
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in stats]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def tree_ticks(roots: set[int], stats: Mapping[int, ProcStat]) -> int | None:
    """CPU ticks of the trees under `roots`: each live process's own and reaped
    ticks (a reaped child is no longer live, so nothing counts twice). None when
    no root is running."""
    pids = descendants(roots, stats)
    if not pids:
        return None
    return sum(stats[pid].own + stats[pid].reaped for pid in pids)


# A group's ticks in one sample: None when its processes are not on this machine.
Group = Callable[[Mapping[int, ProcStat]], int | None]


def tree(pid: int) -> Group:
    """A process and everything it started (the server, River's bench)."""
    return lambda stats: tree_ticks({pid}, stats)


def alone(pid: int) -> Group:
    """One process's own threads, not its children: the bench process, whose child
    the server is."""
    return lambda stats: stats[pid].own if pid in stats else None


def postgres(stats: Mapping[int, ProcStat]) -> int | None:
    """Every Postgres process on the machine: the trees under each postmaster (a
    `postgres` process whose parent is not one), so backends, background writers,
    autovacuum, and the backends of other clients of the same server."""
    return _servers(POSTGRES_NAMES, stats)


def mysql(stats: Mapping[int, ProcStat]) -> int | None:
    """Every MariaDB or MySQL server on the machine (the MySQL store's database): the
    trees under each `mariadbd` or `mysqld` process whose parent is not one. The server
    is one process whose threads serve every connection, so its ticks hold the
    store's queries, its background threads (purge, page cleaner, log writer) and
    other clients' queries on the same server; a `mysqld_safe` wrapper above it is a
    shell that waits, and is left out."""
    return _servers(MYSQL_NAMES, stats)


POSTGRES_NAMES = frozenset({"postgres"})
MYSQL_NAMES = frozenset({"mariadbd", "mysqld"})


def _servers(names: frozenset[str], stats: Mapping[int, ProcStat]) -> int | None:
    return tree_ticks({s.pid for s in stats.values() if _is_root(s, names, stats)}, stats)


def _is_root(stat: ProcStat, names: frozenset[str], stats: Mapping[int, ProcStat]) -> bool:
    parent = stats.get(stat.ppid)
    return stat.comm in names and (parent is None or parent.comm not in names)


def store(mysql_store: bool) -> tuple[str, Group]:
    """The projection store's database as a group: MariaDB/MySQL on the MySQL store,
    Postgres otherwise. It counts in pinledger's total; on the MySQL store the server
    does not use Postgres, whose CPU then falls in the rest of the machine."""
    return (MYSQL, mysql) if mysql_store else (POSTGRES, postgres)


def kafka(proc: Path = PROC) -> Group:
    """The Kafka broker's JVM: a `java` process whose command line runs kafka.Kafka."""

    def ticks(stats: Mapping[int, ProcStat]) -> int | None:
        roots = {s.pid for s in stats.values() if s.comm == "java" and _runs_kafka(s.pid, proc)}
        return tree_ticks(roots, stats)

    return ticks


def _runs_kafka(pid: int, proc: Path) -> bool:
    try:
        return b"kafka.Kafka" in (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    machine: int | None
    groups: dict[str, int | None]


@dataclass
class Window:
    """One timed phase: `start()` and `stop()` sample the meter; the phase sets
    `jobs`, the count its throughput figure is made of."""

    meter: Meter
    jobs: int = 0
    first: Sample | None = None
    last: Sample | None = None

    def start(self) -> None:
        self.first = self.meter.sample()

    def stop(self) -> None:
        self.last = self.meter.sample()

    def seconds(self) -> dict[str, float | None]:
        """CPU seconds per group over the window, and the rest of the machine."""
        if self.first is None or self.last is None:
            return {}
        spent: dict[str, float | None] = {}
        for name, before in self.first.groups.items():
            after = self.last.groups.get(name)
            spent[name] = (
                None if before is None or after is None else (after - before) / TICKS_PER_SECOND
            )
        if self.first.machine is not None and self.last.machine is not None:
            busy = (self.last.machine - self.first.machine) / TICKS_PER_SECOND
            spent[REST] = max(0.0, busy - sum(v for v in spent.values() if v is not None))
        return spent

    def per_job_us(self) -> dict[str, float | None]:
        """CPU microseconds per job per group; "total" sums the groups (not the rest
        of the machine)."""
        if not self.jobs:
            return {}
        spent = self.seconds()
        out = {k: None if v is None else v * 1e6 / self.jobs for k, v in spent.items()}
        known = [v for k, v in out.items() if k != REST and v is not None]
        out["total"] = sum(known) if known else None
        return out


@dataclass
class Meter:
    """Named groups sampled together with the machine's busy ticks."""

    groups: dict[str, Group]
    proc: Path = PROC

    def sample(self) -> Sample:
        stats = read_stats(self.proc)
        try:
            machine: int | None = parse_machine((self.proc / "stat").read_text())
        except (OSError, ValueError):
            machine = None
        return Sample(time.monotonic(), machine, {n: g(stats) for n, g in self.groups.items()})

    def window(self) -> Window:
        return Window(self)


class Trace:
    """Samples a meter every `interval` seconds on a thread, so that a window's end
    can be chosen afterwards: River says when its timed period ended only as it exits."""

    def __init__(self, meter: Meter, interval: float = 0.1) -> None:
        self.meter = meter
        self.interval = interval
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-cpu-trace")

    def start(self) -> None:
        self.samples.append(self.meter.sample())
        self._thread.start()

    def stop(self) -> None:
        if self._stop.is_set() or not self.samples:
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.samples.append(self.meter.sample())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(self.meter.sample())

    def window(self, seconds: float) -> Window:
        """The window from the first sample to the first one at least `seconds`
        later (the last sample when none is)."""
        first = self.samples[0]
        last = next((s for s in self.samples if s.at - first.at >= seconds), self.samples[-1])
        return Window(self.meter, first=first, last=last)


def go_seconds(text: str) -> float:
    """A Go duration as Go prints it ("292.446077ms", "4.5s", "1m2.25s")."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    parts = re.findall(r"([\d.]+)(h|ms|m|s|us|µs|ns)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(number) * units[unit] for number, unit in parts)


def available(proc: Path = PROC) -> bool:
    """Whether this machine has a /proc to read (Linux)."""
    return (proc / "stat").is_file() and (proc / "self" / "stat").is_file()


def table_rows(
    systems: list[tuple[str, dict[str, Window]]], phases: list[str]
) -> list[tuple[str, list[float | str | None]]]:
    """The CPU table: one row per system and group ("total" after its groups, the
    rest of the machine last), one value per phase ("" where the system did not run
    the phase)."""
    rows: list[tuple[str, list[float | str | None]]] = []
    for system, windows in systems:
        figures = {phase: w.per_job_us() for phase, w in windows.items()}
        names: list[str] = []
        for per_job in figures.values():
            names += [n for n in per_job if n not in names and n not in ("total", REST)]
        for name in [*names, "total", REST]:
            values: list[float | str | None] = [
                figures[p].get(name) if figures.get(p) else "" for p in phases
            ]
            if any(v != "" for v in values):
                rows.append((f"{system}: {name}", values))
    return rows


# The heading of the ratio table (`ratio_rows`).
WHOLE_SYSTEM = "CPU per job, whole system"


def ratio_rows(
    systems: list[tuple[str, dict[str, Window]]], phases: list[str]
) -> list[tuple[str, list[float | str | None]]]:
    """pinledger's whole-system CPU per job over each peer's ("total" over "total";
    the first system is pinledger's): one row per peer, one ratio per phase, "" where
    the peer did not run the phase, n/a where either total is missing. Below 1.00x,
    a job costs the machine less on pinledger."""
    if len(systems) < 2:
        return []
    (ours_name, ours), *peers = systems
    rows: list[tuple[str, list[float | str | None]]] = []
    for name, windows in peers:
        values: list[float | str | None] = []
        for phase in phases:
            theirs = windows[phase].per_job_us() if phase in windows else {}
            if not theirs:
                values.append("")
                continue
            mine = ours[phase].per_job_us().get("total") if phase in ours else None
            total = theirs.get("total")
            values.append(f"{mine / total:.2f}x" if mine is not None and total else None)
        if any(v != "" for v in values):
            rows.append((f"{ours_name}/{name}", values))
    return rows
