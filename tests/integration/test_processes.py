"""`pinledger serve --processes 2`: one port, two owners; a worker killed is started
again and no acknowledged job is lost; SIGTERM stops every process."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger.kafka import KafkaLog
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    free_port,
    run_pinledger,
    wait_for,
)
from tests.integration.conftest import Names, server_settings

pytestmark = pytest.mark.integration


def host_health(server: ServerProcess) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{server.admin_port}/health"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failing:
        return failing.code, json.loads(failing.read())


def owned_partitions(server: ServerProcess) -> dict[str, float]:
    """pinledger_owned_partitions per process, from the host's one /metrics."""
    url = f"http://127.0.0.1:{server.admin_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("pinledger_owned_partitions{"):
            labels, value = line.split(" ")
            found[labels.split('process="')[1].split('"')[0]] = float(value)
    return found


def each_owns(kafka: KafkaLog, prefix: str, queue: str, peer_ports: set[int]) -> bool:
    """The queue's partitions are spread over exactly the members named after these
    peer ports."""
    members = kafka.group_members(f"{prefix}owners")
    topic = f"{prefix}q.{queue}"
    owning = {
        int(m.member_id.rsplit(":", 1)[1])
        for m in members
        if any(t == topic for t, _ in m.partitions)
    }
    return len(members) == len(peer_ports) and owning == peer_ports


def enqueue(server: ServerProcess, queue: str, count: int, tag: str) -> set[str]:
    client = server.client()
    try:
        jobs = [p.PinLaterJob(body=f"{tag}-{i}".encode()) for i in range(count)]
        answer = client.enqueueJobs(context(), p.PinLaterEnqueueRequest(queueName=queue, jobs=jobs))
        return set(answer.jobDescriptors)
    finally:
        client.close()


def dequeue_all(server: ServerProcess, queue: str, count: int) -> set[str]:
    """Through the one port, over fresh connections (the kernel spreads them)."""
    got: set[str] = set()
    while len(got) < count:
        client = server.client()
        try:
            got |= set(dequeue_until(client, queue, 1, limit=count - len(got), timeout=60))
        finally:
            client.close()
    return got


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_two_processes_share_one_port_survive_a_kill_and_stop_on_sigterm(
    kafka: KafkaLog, names: Names, tmp_path: Path
) -> None:
    prefix, schema = names
    server = ServerProcess(
        prefix=prefix,
        schema=schema,
        settings=server_settings(
            PINLEDGER_PROCESSES="2",
            PINLEDGER_PARTITIONS="4",
            PINLEDGER_SESSION_TIMEOUT_MS="6000",
        ),
    )
    server.start(tmp_path)  # healthy: the host's /health says both processes are
    try:
        code, health = host_health(server)
        assert code == 200, health
        first = {int(i): w for i, w in health["processes"].items()}
        assert sorted(first) == [0, 1] and first[0]["pid"] != first[1]["pid"]
        setup = server.client()
        setup.createQueue(context(), "work")
        setup.close()
        ports = {w["peer_port"] for w in first.values()}
        wait_for(lambda: each_owns(kafka, prefix, "work", ports), timeout=60)
        wait_for(lambda: all(owned_partitions(server).get(i, 0) > 0 for i in "01"), timeout=30)

        before = enqueue(server, "work", 100, "before")
        assert dequeue_all(server, "work", 100) == before

        acknowledged = enqueue(server, "work", 100, "after")
        os.kill(first[0]["pid"], signal.SIGKILL)

        def restarted() -> dict[str, Any] | None:
            code, health = host_health(server)
            zero = health["processes"]["0"]
            return health if code == 200 and zero["pid"] not in (None, first[0]["pid"]) else None

        again = wait_for(restarted, timeout=90, pause=0.5)
        # One restart for the kill; a second only when a port the supervisor picked
        # was taken before the new worker bound it (plan.free_port), as its log says.
        restarts = again["processes"]["0"]["restarts"]
        log = server.log()
        assert restarts == 1 or (restarts == 2 and "is already in use" in log), log[-5000:]
        assert again["processes"]["1"]["pid"] == first[1]["pid"]
        ports = {w["peer_port"] for w in again["processes"].values()}
        wait_for(lambda: each_owns(kafka, prefix, "work", ports), timeout=60)
        assert dequeue_all(server, "work", 100) == acknowledged

        workers = [w["pid"] for w in again["processes"].values()]
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
        assert not any(alive(pid) for pid in workers)
    finally:
        server.stop()


def test_the_supervisor_gives_up_on_processes_that_keep_failing() -> None:
    """Each process exits at start (no Postgres at that address): after 5 such exits in
    a row the supervisor stops and exits 1, so systemd or Kubernetes sees the failure."""
    nowhere = "postgresql://pinledger:pinledger@127.0.0.1:1/pinledger"
    done = run_pinledger(
        "serve",
        "--processes",
        "2",
        timeout=180,
        PINLEDGER_STORE_DSN=nowhere,
        PINLEDGER_PG_DSN=nowhere,
        PINLEDGER_PORT=str(free_port()),
        PINLEDGER_ADMIN_PORT=str(free_port()),
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "exited 5 times in a row" in done.stderr and "giving up" in done.stderr
