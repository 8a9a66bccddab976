"""Failover with three servers (issue 43), under load through the project's client
(`PinLaterClient`, tests/chaos/client_load.py) with the servers in its server list: one
server stopped (SIGTERM), killed (SIGKILL), frozen for less than its session timeout
(SIGSTOP, SIGCONT), and all three restarted in turn (a rolling restart).

What a user is promised, and each case checks: a SIGTERMed server stops accepting
calls, closes its idle connections, answers the calls in flight and leaves the owners'
group, so its callers see no failed call and it exits 0 (each SIGTERM comes as a burst
of enqueues is on its way, some on connections just opened); a SIGKILLed server's
partitions serve again within about 2 s. After every case: each acknowledged enqueue
ends SUCCEEDED, no job is handed out twice (the load sends a failed ack again on
another server, so a second run is a double hand-out unless that ack landed only after
the claim timeout: tests/chaos/load.py), the log replays to exactly the live tables,
and the servers not stopped on purpose are the same processes and stop cleanly.

The time until every partition is served again (a dequeue + ack of each) is measured
and goes into the chaos table with the failed calls, counted from the fault to the end
of the drain.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pinledger.service.testing.servers import ServerProcess, wait_for
from tests.chaos.client_load import ClientLoad
from tests.chaos.report import ROWS, Row
from tests.chaos.stage import (
    CLAIM_TIMEOUT_S,
    PARTITIONS,
    QUEUE,
    RECOVERY_LIMIT_S,
    SESSION_TIMEOUT_MS,
    WARM_LIMIT_S,
    Stage,
    drain,
    replay_is_identical,
    still_running,
)

pytestmark = pytest.mark.chaos

# Issue 43: a SIGKILLed server's partitions serve again within ~2 s; the slack is for
# a 2-core CI running three servers and three brokers.
KILLED_SERVED_AGAIN_S = 4.0
# Shorter than the session timeout: the frozen server should keep its partitions.
FROZEN_S = 5.0
assert FROZEN_S < SESSION_TIMEOUT_MS / 1000
# A frozen server answers nothing: the client gives up on a call to it after this, so
# an ack stuck there is sent again elsewhere well within the claim timeout.
FROZEN_CALL_TIMEOUT_S = 2.0
# More callers than the other chaos cases, pausing less: a call is in flight at most
# moments and pooled connections are reused at once, so a stop that drops a call in
# flight or sent on a connection it closes shows as a failed call. Measured before
# issue 43's failover (090ac1a): through two servers, one to three failed calls in 13
# of 22 SIGTERMs; with it (19f5510), through three servers, one in 3 of 15.
LOAD: dict[str, Any] = {"producers": 3, "workers": 6, "pause_s": 0.01}
# At each SIGTERM, this many enqueues of this many jobs are started together, just
# before the signal: calls in flight on the stopping server, whatever the load's timing.
BURST_CALLS = 12
BURST_BATCH = 50
BURST_LEAD_S = 0.01
# How long a new server may take to join the owners' group.
JOIN_LIMIT_S = 60


def gauge(server: ServerProcess, name: str) -> int | None:
    """A gauge of the server's /metrics (None while it does not export it)."""
    with server.admin_get("/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
    return int(float(found.group(1))) if found else None


def owned_partitions(server: ServerProcess) -> int:
    """The queue partitions the server owns (the catalog's is not counted)."""
    return gauge(server, "pinledger_owned_partitions") or 0


def in_the_group(server: ServerProcess, members: int) -> bool:
    """The server counts `members` live servers in the owners' group, and none of the
    partitions is unowned: it joined and the rebalance assigned everything. (It may
    own no queue partition: the sticky assignment can give it only the catalog's.)"""
    counts = re.findall(r"(\d+) live server\(s\) share the partitions", server.log())
    if not counts or int(counts[-1]) != members:
        return False
    return not gauge(server, "pinledger_unowned_partitions")  # None: not read the group yet


def warm(load: ClientLoad) -> None:
    """Every partition served once, and a little more load, before the fault."""
    began = time.monotonic()
    wait_for(lambda: load.served_again(began, PARTITIONS), WARM_LIMIT_S, 0.2)
    time.sleep(2)


def served_again(stage: Stage, load: ClientLoad, since: float, after: str) -> float:
    """Seconds from `since` until every partition was served again (a dequeue + ack
    begun since), or the test fails saying what worked."""
    try:
        seconds: float = wait_for(
            lambda: load.served_again(since, PARTITIONS), RECOVERY_LIMIT_S, 0.1
        )
    except AssertionError:
        pytest.fail(
            f"not every partition was served again within {RECOVERY_LIMIT_S} s of {after}.\n"
            f"Since then: {load.since(since)}\n"
            + "\n".join(f"server {i} log:\n{s.log_tail()}" for i, s in enumerate(stage.servers))
        )
    return seconds


def pooled(server: ServerProcess) -> int:
    """The client connections open on the server: its share of the client's pool,
    idle between calls, which a SIGTERM must close without failing a call."""
    open_now = gauge(server, "pinledger_connections_open")
    assert open_now, f"no client connection open on {server.port}: the case tests nothing"
    return open_now


def stop(server: ServerProcess, load: ClientLoad) -> float:
    """SIGTERM while a burst of enqueues is on its way (some to this server, some on
    connections just opened); the seconds until it exited, which must be cleanly (0).
    Returns once the burst's calls are answered too."""
    burst = load.burst(BURST_CALLS, BURST_BATCH)
    time.sleep(BURST_LEAD_S)
    sent = time.monotonic()
    server.stop()
    exited_s = time.monotonic() - sent
    for thread in burst:
        thread.join(RECOVERY_LIMIT_S)
    assert server.proc is not None
    assert server.proc.returncode == 0, (
        f"the SIGTERMed server exited {server.proc.returncode} (not 0) after "
        f"{exited_s:.1f} s:\n{server.log_tail()}"
    )
    return exited_s


@contextmanager
def loaded(stage: Stage, tmp_path: Path, timeout_s: float | None = None) -> Iterator[ClientLoad]:
    """The client load through the stage's servers, warmed up."""
    options: dict[str, Any] = {} if timeout_s is None else {"timeout_s": timeout_s}
    with ClientLoad(
        stage.servers, QUEUE, tmp_path, claim_timeout_s=CLAIM_TIMEOUT_S, **LOAD, **options
    ) as load:
        warm(load)
        yield load


def finish(stage: Stage, load: ClientLoad, gone: set[int]) -> list[str]:
    """More load on the recovered service, then the drain: the acknowledged enqueues
    not SUCCEEDED."""
    time.sleep(2)
    load.stop_producing()
    return drain(stage, load, gone)


def record(
    load: ClientLoad,
    fault: str,
    lost: list[str],
    recovered_s: float,
    measured_from: str,
    fault_at: float,
    details: list[str],
) -> Row:
    """The case's row of the chaos table (added to it), with what the load saw from
    the fault on."""
    failures = load.failures_between(fault_at, time.monotonic())
    doubles = load.double_hand_outs()
    with load.record.lock:
        late, retries = len(load.record.late), load.record.ack_retries
        lost_enqueues = load.record.unacknowledged_enqueues
    row = Row(
        fault=fault,
        jobs=len(load.record.enqueued),
        lost=len(lost),
        duplicate_runs=load.duplicate_runs(),
        recovered_s=recovered_s,
        measured_from=measured_from,
        failed_calls=len(failures),
        longest_failed_call_s=max((f.seconds for f in failures), default=0.0),
        answers=Counter(f.what[:110] for f in failures),
        details=[
            *details,
            f"double hand-outs (a second run of a job acked within the claim timeout): "
            f"{len(doubles)}; jobs acked late or never: {late}; acks sent again: {retries}; "
            f"enqueue calls failed: {lost_enqueues}",
        ],
    )
    ROWS.append(row)
    return row


def nothing_lost_or_run_twice(row: Row, load: ClientLoad, lost: list[str]) -> None:
    assert not lost, f"{row.fault}: {len(lost)} acknowledged jobs were lost: {lost[:10]}"
    doubles = load.double_hand_outs()
    assert not doubles, (
        f"{row.fault}: {len(doubles)} jobs were handed out again while claimed (their "
        f"acks landed within the {CLAIM_TIMEOUT_S} s claim timeout): "
        f"{sorted(doubles.items())[:10]}"
    )


def no_failed_call(row: Row, load: ClientLoad, fault_at: float) -> None:
    failures = load.failures_between(fault_at, time.monotonic())
    assert not failures, f"{row.fault}: callers saw {len(failures)} failed calls:\n" + "\n".join(
        f"  at +{f.started - fault_at:.3f} s, after {f.seconds:.3f} s: {f.what}"
        for f in failures[:10]
    )


def test_a_server_stopped_under_load_costs_callers_nothing(trio: Stage, tmp_path: Path) -> None:
    with loaded(trio, tmp_path) as load:
        connections = pooled(trio.servers[1])
        fault_at = time.monotonic()
        exited_s = stop(trio.servers[1], load)
        exited_at = fault_at + exited_s
        recovered_s = served_again(trio, load, fault_at, "the SIGTERM")
        after_exit_s = served_again(trio, load, exited_at, "the stopped server's exit")
        lost = finish(trio, load, {1})
    row = record(
        load,
        "1 of 3 servers stopped (SIGTERM)",
        lost,
        recovered_s,
        "fault",
        fault_at,
        [
            f"the stopped server ({trio.servers[1].port}) exited 0 {exited_s:.1f} s after the "
            f"SIGTERM, closing {connections} client connections; every "
            f"partition served by the other two {after_exit_s:.1f} s after it exited",
        ],
    )
    still_running(trio, {1})
    replay_is_identical(trio)
    nothing_lost_or_run_twice(row, load, lost)
    no_failed_call(row, load, fault_at)


def test_one_of_three_servers_killed(trio: Stage, tmp_path: Path) -> None:
    with loaded(trio, tmp_path) as load:
        fault_at = time.monotonic()
        trio.servers[1].kill()
        recovered_s = served_again(trio, load, fault_at, "the SIGKILL")
        lost = finish(trio, load, {1})
    killed = trio.servers[1]
    row = record(
        load,
        "1 of 3 servers killed (SIGKILL)",
        lost,
        recovered_s,
        "fault",
        fault_at,
        [f"killed: {killed.host}:{killed.port}"],
    )
    still_running(trio, {1})
    replay_is_identical(trio)
    nothing_lost_or_run_twice(row, load, lost)
    assert recovered_s <= KILLED_SERVED_AGAIN_S, (
        f"the killed server's partitions served again only {recovered_s:.1f} s after the "
        f"SIGKILL (promised: about 2 s, allowed {KILLED_SERVED_AGAIN_S} s)"
    )


def test_a_server_frozen_for_5_s(trio: Stage, tmp_path: Path) -> None:
    frozen = trio.servers[1]
    assert frozen.proc is not None
    with loaded(trio, tmp_path, timeout_s=FROZEN_CALL_TIMEOUT_S) as load:
        before = owned_partitions(frozen)
        fault_at = time.monotonic()
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        time.sleep(FROZEN_S)
        os.kill(frozen.proc.pid, signal.SIGCONT)
        thawed_at = time.monotonic()
        recovered_s = served_again(trio, load, thawed_at, "the SIGCONT")
        from_freeze_s = served_again(trio, load, fault_at, "the SIGSTOP")
        lost = finish(trio, load, set())
        after = owned_partitions(frozen)
    kept = "kept" if after == before else "did NOT keep"
    row = record(
        load,
        f"1 of 3 servers frozen (SIGSTOP) {FROZEN_S:.0f} s",
        lost,
        recovered_s,
        "repair",
        fault_at,
        [
            f"the frozen server ({frozen.host}:{frozen.port}) {kept} its share: {before} "
            f"partitions before, {after} after (session timeout "
            f"{SESSION_TIMEOUT_MS / 1000:.0f} s); the client gives up on a call after "
            f"{FROZEN_CALL_TIMEOUT_S:.0f} s",
            f"every partition served again {from_freeze_s:.1f} s after the SIGSTOP",
        ],
    )
    still_running(trio)
    replay_is_identical(trio)
    nothing_lost_or_run_twice(row, load, lost)


def test_a_rolling_restart_of_all_three(trio: Stage, tmp_path: Path) -> None:
    gone: set[int] = set()
    steps: list[str] = []
    worst_s = 0.0
    with loaded(trio, tmp_path) as load:
        fault_at = time.monotonic()
        for index in range(3):
            connections = pooled(trio.servers[index])
            stopped_at = time.monotonic()
            exited_s = stop(trio.servers[index], load)
            gone.add(index)
            served_s = served_again(trio, load, stopped_at, f"server {index}'s SIGTERM")
            new = trio.new_server()
            new.start(tmp_path)
            assert new.proc is not None
            trio.servers.append(new)
            trio.pids.append(new.proc.pid)
            live = [s for i, s in enumerate(trio.servers) if i not in gone]
            load.serve_from(live)  # the operator's server-list update
            wait_for(functools.partial(in_the_group, new, 3), JOIN_LIMIT_S, 0.2)
            joined_at = time.monotonic()
            rejoined_s = served_again(trio, load, joined_at, f"server {index}'s successor joined")
            worst_s = max(worst_s, served_s)
            steps.append(
                f"server {index}: exited 0 {exited_s:.1f} s after SIGTERM, closing "
                f"{connections} client connections; every partition "
                f"served again {served_s:.1f} s after it; its successor joined the owners "
                f"{joined_at - stopped_at:.1f} s after the SIGTERM, every partition served "
                f"{rejoined_s:.1f} s after that"
            )
        lost = finish(trio, load, gone)
    row = record(
        load,
        "rolling restart of 3 servers (SIGTERM)",
        lost,
        worst_s,
        "fault",
        fault_at,
        steps,
    )
    still_running(trio, gone)
    replay_is_identical(trio)
    nothing_lost_or_run_twice(row, load, lost)
    no_failed_call(row, load, fault_at)
