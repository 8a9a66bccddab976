"""The benchmark's parts that need no server: the CPU-per-job meter (bench/cpu.py)
reads /proc correctly (the stat fields, process trees, Postgres, MariaDB/MySQL and
Kafka found by name, CPU that moved to a parent when a child exited), the store's
database in pinledger's total, the ratio of whole-system CPU per job to each peer's;
River's summary line and database URL (bench/river.py); the choice of peers (River by
default where Go is installed) and their columns."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import cpu, fold, river
from bench.call_profile import NEW, Threads, sampled
from bench.table import Row, render
from pinledger.ledger import codec
from pinledger.ledger.state import JobState
from pinledger.projections.verify_fold import IdRange, PartitionFold
from pinledger.service.observability.ledger_metrics import JOBS, REJECTED

# A real /proc/<pid>/stat line (fields 1..52), with utime 1500, stime 300,
# cutime 40, cstime 2.
LINE = (
    "4242 (python3) S 4000 4242 4000 34816 4242 4194304 52000 0 12 0 1500 300 40 2 20 0 "
    "12 0 987654 500000000 30000 18446744073709551615 1 1 0 0 0 0 0 16781312 134234626 "
    "0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)


def stat_line(pid: int, comm: str, ppid: int, utime: int, stime: int, reaped: int = 0) -> str:
    return (
        f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 10 0 0 0 {utime} {stime} "
        f"{reaped} 0 20 0 1 0 100 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 "
        "17 0 0 0 0 0 0\n"
    )


class FakeProc:
    """A /proc tree in a temporary directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.machine("cpu  100 0 50 1000 5 0 0 0 0 0\n")
        (root / "self").mkdir()
        (root / "self" / "stat").write_text(LINE)

    def process(
        self,
        pid: int,
        comm: str,
        ppid: int,
        utime: int,
        stime: int = 0,
        reaped: int = 0,
        cmdline: list[str] | None = None,
    ) -> None:
        folder = self.root / str(pid)
        folder.mkdir(exist_ok=True)
        (folder / "stat").write_text(stat_line(pid, comm, ppid, utime, stime, reaped))
        (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline or [comm]))

    def exit(self, pid: int) -> None:
        for child in (self.root / str(pid)).iterdir():
            child.unlink()
        (self.root / str(pid)).rmdir()

    def machine(self, line: str) -> None:
        (self.root / "stat").write_text(line + "intr 1 2 3\n")


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def test_parse_stat_reads_the_fields_after_the_command_name() -> None:
    stat = cpu.parse_stat(LINE)
    assert (stat.pid, stat.comm, stat.ppid) == (4242, "python3", 4000)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (1500, 300, 40, 2)
    assert (stat.own, stat.reaped) == (1800, 42)


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() -> None:
    stat = cpu.parse_stat(LINE.replace("(python3)", "(a b) (c))"))
    assert stat.comm == "a b) (c)"
    assert (stat.ppid, stat.utime, stat.stime) == (4000, 1500, 300)


def test_machine_busy_ticks_leave_out_idle_and_iowait() -> None:
    # user 10, nice 1, system 5, idle 1000, iowait 7, irq 2, softirq 3, steal 4
    assert cpu.parse_machine("cpu  10 1 5 1000 7 2 3 4 0 0\ncpu0 1 1 1 1 1 1 1 1\n") == 25
    with pytest.raises(ValueError):
        cpu.parse_machine("intr 1\n")


def test_a_tree_counts_its_children_and_not_its_parent(proc: FakeProc) -> None:
    proc.process(10, "bench", 1, utime=100, stime=10)
    proc.process(11, "server", 10, utime=200, stime=20, reaped=5)
    proc.process(12, "worker", 11, utime=30)
    stats = cpu.read_stats(proc.root)
    assert cpu.tree(11)(stats) == 200 + 20 + 5 + 30
    assert cpu.alone(10)(stats) == 110
    assert cpu.tree(99)(stats) is None
    assert cpu.alone(99)(stats) is None


def test_postgres_is_every_process_under_each_postmaster(proc: FakeProc) -> None:
    proc.process(20, "postgres", 1, utime=50, reaped=7)  # postmaster
    proc.process(21, "postgres", 20, utime=5)  # checkpointer
    proc.process(22, "postgres", 20, utime=300, stime=30)  # a backend
    proc.process(30, "python3", 1, utime=999)
    assert cpu.postgres(cpu.read_stats(proc.root)) == 50 + 7 + 5 + 330


def test_kafka_is_the_jvm_that_runs_kafka_dot_kafka(proc: FakeProc) -> None:
    proc.process(40, "java", 1, utime=700, cmdline=["java", "-Xmx512m", "kafka.Kafka", "a"])
    proc.process(41, "java", 1, utime=900, cmdline=["java", "-jar", "other.jar"])
    assert cpu.kafka(proc.root)(cpu.read_stats(proc.root)) == 700


def test_no_postgres_or_kafka_on_the_machine_is_none_not_zero(proc: FakeProc) -> None:
    proc.process(30, "python3", 1, utime=999)
    stats = cpu.read_stats(proc.root)
    assert cpu.postgres(stats) is None
    assert cpu.kafka(proc.root)(stats) is None


def test_mariadb_and_mysql_are_each_server_process_and_its_threads(proc: FakeProc) -> None:
    proc.process(50, "mysqld_safe", 1, utime=1)  # the wrapper shell: left out
    proc.process(51, "mariadbd", 50, utime=400, stime=40)
    proc.process(60, "mysqld", 1, utime=25)
    proc.process(20, "postgres", 1, utime=50)
    stats = cpu.read_stats(proc.root)
    assert cpu.mysql(stats) == 440 + 25
    assert cpu.postgres(stats) == 50


def test_on_the_mysql_store_mariadbd_counts_in_pinledgers_total(proc: FakeProc) -> None:
    proc.process(11, "python3", 10, utime=0)  # the server
    proc.process(10, "python3", 1, utime=0)  # the bench process
    proc.process(51, "mariadbd", 1, utime=0)
    proc.process(20, "postgres", 1, utime=0)
    mysql_url = "mysql://pinledger:pinledger@127.0.0.1:33069/pinledger"
    pg_url = "postgresql://pinledger:pinledger@127.0.0.1:54329/pinledger"
    on_mysql = cpu.Meter(bench_main.pinledger_groups(11, 10, mysql_url), proc.root).window()
    on_pg = cpu.Meter(bench_main.pinledger_groups(11, 10, pg_url), proc.root).window()
    on_mysql.start()
    on_pg.start()
    proc.process(11, "python3", 10, utime=500)
    proc.process(51, "mariadbd", 1, utime=300)
    proc.process(20, "postgres", 1, utime=40)
    proc.machine("cpu  940 0 50 1000 5 0 0 0 0 0\n")
    on_mysql.stop()
    on_pg.stop()
    on_mysql.jobs = on_pg.jobs = 1
    us = 1e6 / cpu.TICKS_PER_SECOND  # one tick, in microseconds
    mysql_job, pg_job = on_mysql.per_job_us(), on_pg.per_job_us()
    # On MySQL the database row is MariaDB's and it is in the total; the idle-for-us
    # Postgres is in the rest of the machine.
    assert mysql_job[cpu.MYSQL] == pytest.approx(300 * us)
    assert cpu.POSTGRES not in mysql_job
    assert mysql_job["total"] == pytest.approx(800 * us)
    assert mysql_job[cpu.REST] == pytest.approx(40 * us)
    # On Postgres it is the other way round.
    assert pg_job[cpu.POSTGRES] == pytest.approx(40 * us)
    assert cpu.MYSQL not in pg_job
    assert pg_job["total"] == pytest.approx(540 * us)
    assert pg_job[cpu.REST] == pytest.approx(300 * us)


def test_a_window_counts_a_backend_that_exited_through_its_postmaster(proc: FakeProc) -> None:
    proc.process(20, "postgres", 1, utime=50)
    proc.process(22, "postgres", 20, utime=300)
    proc.process(11, "server", 1, utime=1000)
    meter = cpu.Meter({"server": cpu.tree(11), "postgres": cpu.postgres}, proc.root)
    window = meter.window()
    window.start()
    # The backend worked 100 ticks more, then exited; the postmaster reaped it.
    proc.exit(22)
    proc.process(20, "postgres", 1, utime=52, reaped=400)
    proc.process(11, "server", 1, utime=1300, stime=100)
    proc.machine("cpu  1000 0 150 1000 5 0 0 0 0 0\n")
    window.stop()
    window.jobs = 1_000
    seconds = window.seconds()
    ticks = cpu.TICKS_PER_SECOND
    assert seconds["server"] == pytest.approx(400 / ticks)
    assert seconds["postgres"] == pytest.approx(102 / ticks)
    # The machine was busy 1000 ticks more; 502 of them are the groups'.
    assert seconds[cpu.REST] == pytest.approx(498 / ticks)
    per_job = window.per_job_us()
    assert per_job["server"] == pytest.approx(400 / ticks * 1e6 / 1_000)
    assert per_job["total"] == pytest.approx(502 / ticks * 1e6 / 1_000)


def test_a_window_without_jobs_reports_nothing(proc: FakeProc) -> None:
    window = cpu.Meter({}, proc.root).window()
    window.start()
    window.stop()
    assert window.per_job_us() == {}


def test_the_cpu_table_has_a_row_per_group_and_a_blank_where_a_phase_did_not_run(
    proc: FakeProc,
) -> None:
    proc.process(11, "server", 1, utime=0)
    meter = cpu.Meter({"server": cpu.tree(11)}, proc.root)
    window = meter.window()
    window.start()
    proc.process(11, "server", 1, utime=cpu.TICKS_PER_SECOND)
    window.stop()
    window.jobs = 1_000
    rows = dict(cpu.table_rows([("River", {"b50": window})], ["b1", "b50"]))
    assert rows["River: server"] == ["", pytest.approx(1_000.0)]
    assert rows["River: total"] == ["", pytest.approx(1_000.0)]
    assert list(rows) == ["River: server", "River: total", f"River: {cpu.REST}"]


def test_the_table_gives_pinledgers_whole_system_cpu_per_job_against_each_peer(
    proc: FakeProc,
) -> None:
    pids = {"pinledger": 11, "PgQueuer": 12, "River": 13}
    for pid in pids.values():
        proc.process(pid, "python3", 1, utime=0)
    meters = {name: cpu.Meter({name: cpu.tree(pid)}, proc.root) for name, pid in pids.items()}
    phases = {"pinledger": ("b1", "b50"), "PgQueuer": ("b1", "b50"), "River": ("b50",)}
    windows = {name: {p: meters[name].window() for p in run} for name, run in phases.items()}
    for phase_windows in windows.values():
        for window in phase_windows.values():
            window.start()
    # 300, 100 and 100 ticks: per job, pinledger 3 (b1) and 2 (b50), PgQueuer 1 and 4,
    # River 1 (b50 only).
    proc.process(11, "python3", 1, utime=300)
    proc.process(12, "python3", 1, utime=100)
    proc.process(13, "python3", 1, utime=100)
    jobs = {("pinledger", "b50"): 150, ("PgQueuer", "b50"): 25}
    for name, phase_windows in windows.items():
        for phase, window in phase_windows.items():
            window.stop()
            window.jobs = jobs.get((name, phase), 100)
    systems = list(windows.items())
    ratios = cpu.ratio_rows(systems, ["b1", "b50"])
    assert ratios == [
        ("pinledger/PgQueuer", ["3.00x", "0.50x"]),
        ("pinledger/River", ["", "2.00x"]),
    ]
    assert cpu.ratio_rows(systems[:1], ["b1", "b50"]) == []
    text = render(
        [("run", "smoke")],
        [],
        ["PgQueuer", "River bench"],
        cpu.table_rows(systems, ["b1", "b50"]),
        ["completed b1", "completed b50"],
        ratios,
    )
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(cpu.WHOLE_SYSTEM))
    assert "completed b1" in lines[header] and "completed b50" in lines[header]
    assert lines[header + 2].split() == ["pinledger/PgQueuer", "3.00x", "0.50x"]
    assert lines[header + 3].split() == ["pinledger/River", "2.00x"]


SUMMARY_LINE = (
    "bench: total jobs worked [       5000 ], total jobs inserted [       5000 ], "
    "overall job/sec [    17097.2 ], running 292.446077ms\n"
)


def test_rivers_summary_line_is_read_and_its_progress_lines_are_not() -> None:
    summary = river.parse_summary("\x1b[2m" + SUMMARY_LINE)
    assert summary == river.Summary(5000, 5000, 17097.2, "292.446077ms")
    progress = "bench: jobs worked [       5000 ], inserted [          0 ], job/sec [ 2500.0 ] [2s]"
    assert river.parse_summary(progress) is None


def test_rivers_database_url_puts_its_schema_first_on_the_search_path() -> None:
    url = river.database_url("postgresql://pin:secret@127.0.0.1:54329/ledger", "bench_river_1")
    assert url == "postgresql://pin:secret@127.0.0.1:54329/ledger?search_path=bench_river_1"
    keywords = "host=db port=5432 user=pin password=p@ss dbname=x sslmode=disable"
    assert river.database_url(keywords, "s") == (
        "postgresql://pin:p%40ss@db:5432/x?sslmode=disable&search_path=s"
    )


@pytest.fixture
def path_with_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH whose one folder holds a `go` executable, and an empty cache (no River
    built yet); remove the `go` to have a machine without Go."""
    folder = tmp_path / "bin"
    folder.mkdir()
    go = folder / "go"
    go.write_text("#!/bin/sh\necho go1.0\n")
    go.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return go


def test_by_default_river_runs_beside_pgqueuer_where_go_is_installed(path_with_go: Path) -> None:
    args = bench_main.parse_args([])
    assert args.peers == ["pgqueuer", "river"]
    assert args.skipped == {}


def test_without_go_river_is_skipped_and_the_setup_table_says_why(path_with_go: Path) -> None:
    path_with_go.unlink()
    args = bench_main.parse_args([])
    assert args.peers == ["pgqueuer"]
    assert "Go is not installed" in args.skipped["river"]
    skipped: dict[str, str] = {}
    assert bench_main.prepare_river(args, skipped) is None
    assert skipped == args.skipped
    setup = bench_main.note_skipped([("peer", "PgQueuer 0.1"), ("run", "smoke")], skipped)
    assert setup[0] == ("peer", f"PgQueuer 0.1; River skipped: {river.NO_GO}")
    assert setup[1] == ("run", "smoke")
    # An explicit choice of peers says nothing about River.
    assert bench_main.parse_args(["--peer", "pgqueuer"]).skipped == {}
    assert bench_main.parse_args(["--no-peer"]).skipped == {}


def test_without_go_a_river_built_earlier_still_runs_by_default(path_with_go: Path) -> None:
    path_with_go.unlink()
    built = river.cache_dir() / "river"
    built.parent.mkdir(parents=True)
    built.write_text("")
    assert bench_main.parse_args([]).peers == ["pgqueuer", "river"]


@pytest.mark.parametrize(
    ("given", "peers"),
    [
        (["--peer", "pgqueuer"], ["pgqueuer"]),
        (["--peer", "river"], ["river"]),
        (["--peer", "river,pgqueuer"], ["pgqueuer", "river"]),
        (["--peer", "pgqueuer", "--peer", "river"], ["pgqueuer", "river"]),
        (["--peer", "none"], []),
        (["--no-peer"], []),
    ],
)
def test_peers_are_chosen_with_peer(given: list[str], peers: list[str]) -> None:
    assert bench_main.parse_args(given).peers == peers


def test_an_unknown_peer_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_main.parse_args(["--peer", "sidekiq"])


def test_each_peer_has_its_columns_and_only_the_rows_it_ran() -> None:
    rows = [
        Row("enqueue, 1 job per call", 1000.0, "jobs/s", ">= 3000", (500.0, None)),
        Row("completed, batch 50", 9000.0, "jobs/s", ">= 15000", (3000.0, 18000.0)),
    ]
    text = render([("run", "smoke")], rows, ["PgQueuer", "River bench"])
    header = next(line for line in text.splitlines() if line.startswith("measure"))
    assert header.index("PgQueuer") < header.index("pinledger/PgQueuer")
    assert header.index("pinledger/PgQueuer") < header.index("pinledger/River bench")
    enqueue = next(line for line in text.splitlines() if line.startswith("enqueue"))
    completed = next(line for line in text.splitlines() if line.startswith("completed"))
    assert enqueue.rstrip().endswith("2.00x")
    assert completed.rstrip().endswith("0.50x")
    assert "3.00x" in completed


def test_go_durations_as_river_prints_them() -> None:
    assert cpu.go_seconds("292.446077ms") == pytest.approx(0.292446077)
    assert cpu.go_seconds("4.5s") == pytest.approx(4.5)
    assert cpu.go_seconds("1m2.25s") == pytest.approx(62.25)
    assert cpu.go_seconds("750µs") == pytest.approx(0.00075)
    with pytest.raises(ValueError):
        cpu.go_seconds("soon")


def test_a_trace_ends_its_window_at_the_first_sample_after_the_period(proc: FakeProc) -> None:
    proc.process(11, "river", 1, utime=0)
    trace = cpu.Trace(cpu.Meter({"river": cpu.tree(11)}, proc.root), interval=3600)
    trace.start()
    trace.stop()
    start, end = trace.samples
    # A period longer than the trace: the window ends at its last sample.
    assert trace.window(10_000).last is end
    assert trace.window(0).last is start


# -- bench.call_profile ---------------------------------------------------------------


def test_call_profile_counts_a_thread_that_ends_inside_the_window_as_new() -> None:
    """A connection's thread ends when the load closes it; its CPU must still count."""

    def burn() -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.1:
            pass
        time.sleep(0.05)  # as a connection waits for its close: the sampler runs meanwhile

    spent = Threads()
    with sampled(os.getpid(), spent, every_s=0.01):
        worker = threading.Thread(target=burn)
        worker.start()
        worker.join()
        time.sleep(0.05)  # ended: /proc no longer lists it
    new = [name for name in spent.user if name.endswith(NEW)]
    assert new, spent
    assert sum(spent.user[name] + spent.kernel[name] for name in new) >= 8  # of ~10 ticks


# -- bench.fold ------------------------------------------------------------------------


def test_fold_bench_folds_every_job_to_success_on_both_sides() -> None:
    log = fold.records(200)
    assert len(log) == 10  # per 100 jobs: an enqueue record, two of claims, two of acks
    assert sum(len(codec.record_events(r.value, r.headers)) for r in log) == 600
    verify = PartitionFold(IdRange(), None)
    lines = list(verify.events(log))
    assert len(lines) == 600
    assert len(verify.jobs) == 200
    assert {job.state for job in verify.jobs.values()} == {JobState.SUCCEEDED}
    applied = fold.owner_fold(log)
    for outcome in ("enqueued", "claimed", "succeeded"):
        assert applied.snapshot_counter(JOBS, queue="q", outcome=outcome) == 200
    assert REJECTED not in applied.prometheus()
    assert fold.per_event(fold.verify_fold, log, rounds=1) > 0


def test_fold_bench_refuses_a_job_count_it_cannot_build(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        fold.main(["--jobs", "150"])
    assert "multiple of 100" in capsys.readouterr().err
