"""The second, stronger peer: River (Go, github.com/riverqueue/river) through its own
benchmark command, `river bench`, against the same Postgres (issue 14, lever 7).

The `river` command is built once from the Go module proxy at a pinned version into
the user's cache (~/.cache/pinledger-bench/river-<version>/), then run in a schema of
its own (`river migrate-up --schema`), which is dropped afterwards. `river bench -n N`
inserts N jobs (untimed), starts one River client (2,000 workers on one queue) and
times until the last job's completion is written; that run's own summary line is the
figure. docs/performance.md says exactly what it counts. A run without --peer includes
River where Go is installed (or the command is already built): `unavailable()`. When Go
or the module proxy is not there, `prepare()` raises `RiverUnavailableError` and the
benchmark goes on without River, saying why in its setup table.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from bench import cpu, gotool

VERSION = "v0.47.0"
MODULE = "github.com/riverqueue/river/cmd/river"
# River's client, its Postgres driver and bench settings in `river bench` (cmd/river/
# riverbench/river_bench.go at VERSION): shown in the setup rows.
WORKERS = 2_000
RUN_TIMEOUT_S = 900

SUMMARY = re.compile(
    r"total jobs worked \[\s*(\d+) \], total jobs inserted \[\s*(\d+) \], "
    r"overall job/sec \[\s*([\d.]+) \], running (\S+)"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RiverUnavailableError(Exception):
    """River cannot be built or run here; the message says why."""


def cache_dir() -> Path:
    return gotool.cache_root() / "pinledger-bench" / f"river-{VERSION}"


def unavailable() -> str | None:
    """Why River is left out of a default run (`python -m bench` without --peer), or
    None when it can run: its command is already built, or Go is there to build it."""
    if (cache_dir() / "river").is_file() or shutil.which("go") is not None:
        return None
    return NO_GO


NO_GO = (
    "Go is not installed (no `go` command on PATH), so River's `river bench` cannot be "
    "built; install Go to compare with River"
)


def prepare() -> Path:
    """The `river` binary at VERSION, built on first use (bench/gotool.py)."""
    try:
        return gotool.built(MODULE, VERSION, cache_dir() / "river")
    except gotool.GoToolError as exc:
        raise RiverUnavailableError(
            NO_GO if str(exc) == gotool.NO_GO else f"building River: {exc}"
        ) from exc


def database_url(dsn: str, schema: str) -> str:
    """A postgres:// URL (what River's driver takes) for `dsn` with `schema` first on
    the search path: `river bench` runs an unqualified `VACUUM FULL river_job`."""
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(password, safe='')}@" if password else f"{user}@" if user else ""
    host = params.pop("host", "")
    port = params.pop("port", "")
    dbname = quote(params.pop("dbname", ""), safe="")
    address = f"{host}:{port}" if port else host
    params["search_path"] = schema
    return f"postgresql://{auth}{address}/{dbname}?{urlencode(params)}"


@dataclass(frozen=True, slots=True)
class Summary:
    """`river bench`'s last line: jobs worked, jobs inserted, its jobs/s, and the
    period it divided by (its client's start to the last job's completion)."""

    worked: int
    inserted: int
    rate: float
    running: str


def parse_summary(line: str) -> Summary | None:
    found = SUMMARY.search(ANSI.sub("", line))
    if found is None:
        return None
    return Summary(int(found.group(1)), int(found.group(2)), float(found.group(3)), found.group(4))


@dataclass
class RiverResult:
    worked: int
    rate: float
    running: str
    cpu: cpu.Window | None


class River:
    """River's tables in a fresh schema of the same Postgres; `close()` drops it."""

    def __init__(self, binary: Path, dsn: str) -> None:
        self.binary = binary
        self.dsn = dsn
        self.schema = f"bench_river_{uuid.uuid4().hex[:8]}"
        self.url = database_url(dsn, self.schema)

    def install(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        run = subprocess.run(
            [str(self.binary), "migrate-up", "--database-url", self.url, "--schema", self.schema],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if run.returncode != 0:
            raise RiverUnavailableError(f"river migrate-up failed: {gotool.tail(run)}")

    def close(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )

    def bench(self, jobs: int, measure_cpu: bool) -> RiverResult:
        """`river bench -n jobs`: its figure, and the CPU from its "starting iteration"
        log line (the prefill is done) over the period River timed, to the nearest
        0.1 s sample after it."""
        proc = subprocess.Popen(
            [
                str(self.binary),
                "bench",
                "--verbose",
                "--database-url",
                self.url,
                "--schema",
                self.schema,
                "--num-total-jobs",
                str(jobs),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        trace = (
            cpu.Trace(
                cpu.Meter({"river bench process": cpu.tree(proc.pid), cpu.POSTGRES: cpu.postgres})
            )
            if measure_cpu
            else None
        )
        killer = threading.Timer(RUN_TIMEOUT_S, proc.kill)
        killer.start()
        found: Summary | None = None
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = ANSI.sub("", raw).rstrip()
                lines.append(line)
                if "starting iteration" in line and trace is not None:
                    trace.start()
                if line.startswith("bench: "):
                    print(f"  River {line}", file=sys.stderr, flush=True)
                summary = parse_summary(line)
                if summary is not None and found is None:
                    found = summary
                    if trace is not None:
                        trace.stop()
            code = proc.wait()
        finally:
            killer.cancel()
            if trace is not None:
                trace.stop()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if found is None or code != 0:
            raise RiverUnavailableError(f"river bench exited {code}: {' | '.join(lines[-3:])}")
        window = None
        if trace is not None and trace.samples:
            # River's timed period: from its client's start (just after the log line
            # that started the trace) to its last job's completion.
            window = trace.window(cpu.go_seconds(found.running))
            window.jobs = found.worked
        return RiverResult(found.worked, found.rate, found.running, window)


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        return "?"
    run = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    return run.stdout.strip() or "?"
