"""What an operator of pinledger relies on, against real servers, Kafka and Postgres:
claim timeouts and heartbeats, garbage collection, rate limits and draining from the
queue-config file (reloaded while serving), the admin HTTP port, garbage on the Thrift
port, and configuration mistakes refused at start-up. Each test runs its own server
with the settings it needs."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from thriftpy2.rpc import make_client
from thriftpy2.transport import TCyBufferedTransportFactory, TTransportException

from pinledger.idl import pinlater as p
from pinledger.ledger import descriptor
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import (
    ROOT,
    ServerProcess,
    connect,
    context,
    dequeue_until,
    free_port,
    running,
    stop_process,
    wait_for,
)
from tests.integration.conftest import Names, server_settings
from tests.integration.test_api import ack, checkpoint, count, enqueue, error_of, job, lookup

pytestmark = pytest.mark.integration

PENDING, IN_PROGRESS, SUCCEEDED, FAILED = 0, 1, 2, 3


@contextmanager
def serving(names: Names, log_dir: Path, **settings: str) -> Iterator[tuple[ServerProcess, Any]]:
    """One server with `settings` (PINLEDGER_... variables) and a client of it."""
    prefix, schema = names
    server = ServerProcess(prefix=prefix, schema=schema, settings=server_settings(**settings))
    with running([server], log_dir):
        client = server.client()
        try:
            yield server, client
        finally:
            client.close()


def new_queue(client: Any, *, name: str | None = None) -> str:
    queue = name or f"q_{uuid.uuid4().hex[:10]}"
    client.createQueue(context(), queue)
    return queue


def state_of(client: Any, d: str) -> Any:
    return lookup(client, d).get(d)


def write_queue_config(path: Path, **queues: dict[str, Any]) -> None:
    """PinLater's layout; written whole and renamed into place, as an editor or a config
    management tool would, so the watcher never reads half a file."""
    doc = {"queues": [{"name": name, "queueConfig": cfg} for name, cfg in queues.items()]}
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(doc))
    scratch.replace(path)


def try_dequeue(client: Any, queue: str, limit: int = 1, **fields: Any) -> dict[str, bytes] | None:
    """The jobs one dequeue got, or None when the queue was rate limited."""
    request = p.PinLaterDequeueRequest(queueName=queue, limit=limit, **fields)
    try:
        answer = client.dequeueJobs(context(), request)
    except p.PinLaterException as exc:
        if exc.errorCode != p.ErrorCode.DEQUEUE_RATE_LIMITED:
            raise
        return None
    return dict(answer.jobs or {})


# -- claim timeouts ----------------------------------------------------------------------


def test_an_unacked_claim_times_out_to_a_retry_then_to_failed(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path, PINLEDGER_CLAIM_TIMEOUT_S="1") as (_, client):
        queue = new_queue(client)
        (d,) = enqueue(client, queue, job(numAttemptsAllowed=2))
        dequeue_until(client, queue, 1)  # and never acked

        retry = wait_for(lambda: (i := state_of(client, d)).jobState == PENDING and i, 15)
        assert (retry.attemptsAllowed, retry.attemptsRemaining) == (2, 1)
        assert retry.claimDescriptor is None

        assert set(dequeue_until(client, queue, 1)) == {d}
        failed = wait_for(lambda: (i := state_of(client, d)).jobState == FAILED and i, 15)
        assert failed.attemptsRemaining == 0
        assert try_dequeue(client, queue) == {}


def test_heartbeat_checkpoints_keep_a_claim_past_the_timeout(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path, PINLEDGER_CLAIM_TIMEOUT_S="1") as (_, client):
        queue = new_queue(client)
        (d,) = enqueue(client, queue, job())
        dequeue_until(client, queue, 1)
        claim = state_of(client, d).claimDescriptor

        until = time.monotonic() + 3.5  # three and a half claim timeouts
        while time.monotonic() < until:
            checkpoint(client, queue, jobDescriptor=d)
            info = state_of(client, d)
            assert (info.jobState, info.claimDescriptor, info.attemptsRemaining) == (
                IN_PROGRESS,
                claim,
                2,
            )
            time.sleep(0.4)

        # The heartbeats stop: the claim times out as usual.
        wait_for(lambda: state_of(client, d).jobState == PENDING, 15)
        assert state_of(client, d).attemptsRemaining == 1


# -- garbage collection ------------------------------------------------------------------


def test_finished_jobs_are_collected_after_their_ttl_and_keep_their_history(
    names: Names, tmp_path: Path, config: Config
) -> None:
    settings = {
        "PINLEDGER_SUCCEEDED_TTL_S": "1",
        "PINLEDGER_FAILED_TTL_S": "2",
        "PINLEDGER_GC_INTERVAL_S": "0.5",
    }
    with serving(names, tmp_path, **settings) as (server, client):
        queue = new_queue(client)
        done, broken = enqueue(client, queue, job(b"done"), job(b"broken", numAttemptsAllowed=1))
        dequeue_until(client, queue, 2)
        (waiting,) = enqueue(client, queue, job(b"waiting"))
        ack(client, queue, ok=[done], failed=[broken])
        assert {d: i.jobState for d, i in lookup(client, done, broken).items()} == {
            done: SUCCEEDED,
            broken: FAILED,
        }

        wait_for(lambda: done not in lookup(client, done), 15)
        wait_for(lambda: broken not in lookup(client, broken), 15)
        assert count(client, queue, SUCCEEDED) == count(client, queue, FAILED) == 0
        # A pending job is never collected, however long it waits.
        assert state_of(client, waiting).jobState == PENDING

        history = Store(config.pg_dsn, server.schema)
        try:
            for d in (done, broken):
                parsed = descriptor.parse(d)
                steps = history.timeline(queue, parsed.partition, parsed.local_id)
                types = [row[2] for row in steps]
                assert types[0] == "enq" and types[-1] == "gc", types  # codec tags
                assert steps[-1][8] is True  # applied
        finally:
            history.close()


# -- rate limits and pauses from the queue config ------------------------------------------


def test_rate_limits_and_pauses_follow_the_queue_config_file(names: Names, tmp_path: Path) -> None:
    limited, free = f"q_{uuid.uuid4().hex[:10]}", f"q_{uuid.uuid4().hex[:10]}"
    path = tmp_path / "queues.json"
    write_queue_config(path, **{limited: {"maxJobsPerSecond": 100}})
    with serving(names, tmp_path, PINLEDGER_QUEUE_CONFIG=str(path)) as (_, client):
        new_queue(client, name=limited)
        new_queue(client, name=free)
        (d,) = enqueue(client, limited, job())
        dequeue_until(client, limited, 1)

        # Paused (rate 0), once the server has read the edit.
        write_queue_config(path, **{limited: {"maxJobsPerSecond": 0}})
        wait_for(lambda: try_dequeue(client, limited) is None, 15)
        err = error_of(
            lambda: client.dequeueJobs(
                context(),
                p.PinLaterDequeueRequest(
                    queueName=limited,
                    limit=1,
                    jobAckRequest=p.PinLaterJobAckRequest(
                        queueName=limited,
                        jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=d)],
                    ),
                ),
            )
        )
        assert err.errorCode == p.ErrorCode.DEQUEUE_RATE_LIMITED == 429
        assert limited in err.message
        # The refused dequeue still applied its piggybacked ack (PinLater lost it).
        assert state_of(client, d).jobState == SUCCEEDED

        # An unlisted queue is never limited.
        (other,) = enqueue(client, free, job())
        assert set(dequeue_until(client, free, 1)) == {other}
        for _ in range(5):
            assert try_dequeue(client, free, limit=5) == {}

        # One job a second: dequeues work again, and a batch puts the queue in debt.
        write_queue_config(path, **{limited: {"maxJobsPerSecond": 1.0}})
        wait_for(lambda: try_dequeue(client, limited) == {}, 15)
        descriptors = enqueue(client, limited, *(job() for _ in range(10)))
        wait_for(lambda: len(try_dequeue(client, limited, 10, dryRun=True) or {}) == 10, 15)
        got = try_dequeue(client, limited, limit=5)
        assert got is not None and len(got) == 5 and set(got) <= set(descriptors)
        assert [try_dequeue(client, limited, limit=5) for _ in range(3)] == [None] * 3


# -- draining partitions ----------------------------------------------------------------


def test_drained_partitions_take_no_enqueues_but_are_still_dequeued(
    names: Names, tmp_path: Path
) -> None:
    queue = f"q_{uuid.uuid4().hex[:10]}"
    path = tmp_path / "queues.json"
    write_queue_config(path, **{queue: {"partitions": 3, "drainPartitions": [0, 1]}})
    with serving(names, tmp_path, PINLEDGER_QUEUE_CONFIG=str(path)) as (_, client):
        new_queue(client, name=queue)
        # Three partitions: s2 exists, s3 does not.
        assert lookup(client, f"{queue}:s2:p1:999999000") == {}
        assert "it has 3" in error_of(lambda: lookup(client, f"{queue}:s3:p1:0")).message

        descriptors = [d for _ in range(6) for d in enqueue(client, queue, job())]
        assert {descriptor.parse(d).partition for d in descriptors} == {2}

        # Drain the last open partition too: enqueues are refused whole.
        write_queue_config(path, **{queue: {"partitions": 3, "drainPartitions": [0, 1, 2]}})

        def refused() -> bool:
            try:
                descriptors.extend(enqueue(client, queue, job()))
            except p.PinLaterException as exc:
                assert exc.errorCode == p.ErrorCode.ENQUEUE_REJECTED, exc
                return True
            return False

        wait_for(refused, 15)
        before = count(client, queue, PENDING)
        err = error_of(lambda: enqueue(client, queue, job(), job()))
        assert err.errorCode == p.ErrorCode.ENQUEUE_REJECTED and "drain" in err.message
        assert count(client, queue, PENDING) == before == len(descriptors)

        # The jobs already in the drained partition are still handed out.
        got = dequeue_until(client, queue, len(descriptors))
        assert set(got) == set(descriptors)


# -- the admin HTTP port ------------------------------------------------------------------


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode("utf-8")


def test_admin_port_serves_health_metrics_and_stats(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path) as (server, client):
        status, body = http_get(server.admin_port, "/health")
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert set(json.loads(body)["progress"]) == {"owner", "members", "queue-directory"}
        status, body = http_get(server.admin_port, "/ready")
        ready = json.loads(body)
        assert status == 200 and ready["status"] == "ok", ready
        assert ready["checks"]["kafka"] == ready["checks"]["postgres"] == "ok"

        queue = new_queue(client)
        enqueue(client, queue, job(), job(), job())
        status, prometheus = http_get(server.admin_port, "/metrics")
        assert status == 200
        lines = prometheus.splitlines()
        assert any(line.startswith('pinledger_rpc_total{method="enqueueJobs"} ') for line in lines)
        assert f'pinledger_jobs_total{{action="enqueue",queue="{queue}"}} 3' in lines
        assert 'pinledger_dependency_up{dependency="postgres"} 1' in lines
        assert any(line.startswith('pinledger_loop_lag_seconds{loop="owner"} ') for line in lines)

        status, stats = http_get(server.admin_port, "/stats.txt")
        assert status == 200 and "enqueueJobs" in stats

        status, _ = http_get(server.admin_port, "/no/such/page")
        assert status == 404


# -- bad input on the Thrift port ----------------------------------------------------------


def closed_by_server(sock: socket.socket) -> bool:
    """True when the server closes this connection within a few seconds."""
    sock.settimeout(5)
    try:
        return sock.recv(4096) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


@contextmanager
def raw(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        yield sock


def test_garbage_on_the_wire_costs_only_its_own_connection(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path) as (server, client):
        queue = new_queue(client)
        enqueue(client, queue, job())

        def still_serving() -> None:
            enqueue(client, queue, job())  # a connection opened before the garbage
            fresh = connect(server.port)
            try:
                enqueue(fresh, queue, job())
            finally:
                fresh.close()

        # (a) A frame header announcing 2 GB; an HTTP request sent to the Thrift port.
        for garbage in (struct.pack(">i", 2**31 - 1), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            with raw(server.port) as sock:
                sock.sendall(garbage)
                assert closed_by_server(sock), garbage
            still_serving()

        # (b) A valid header, then part of the body, then the client goes away.
        with raw(server.port) as sock:
            sock.sendall(struct.pack(">i", 100) + b"\x80\x01\x00\x01" + b"\x00" * 6)
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_server(sock)
        still_serving()

        # (c) A well-framed payload that is not a Thrift message.
        with raw(server.port) as sock:
            sock.sendall(struct.pack(">i", 20) + b"\xde\xad\xbe\xef" * 5)
            assert closed_by_server(sock)
        still_serving()

        # (d) A client on the buffered (unframed) transport fails at once, not at its timeout.
        unframed = make_client(
            p.PinLater,
            "127.0.0.1",
            server.port,
            trans_factory=TCyBufferedTransportFactory(),
            timeout=20_000,
        )
        try:
            started = time.monotonic()
            with pytest.raises(TTransportException) as caught:
                unframed.getQueueNames(context())
            assert time.monotonic() - started < 15, caught.value
        finally:
            unframed.close()
        still_serving()

        assert server.proc is not None and server.proc.poll() is None
        assert count(client, queue, PENDING) == 1 + 5 * 2


def test_delete_queue_without_a_configured_password_is_refused(
    names: Names, tmp_path: Path
) -> None:
    with serving(names, tmp_path, PINLEDGER_ADMIN_PASSWORD_SHA256="") as (_, client):
        queue = new_queue(client)
        for password in ("", "let-me-delete", "anything"):
            err = error_of(lambda password=password: client.deleteQueue(context(), queue, password))
            assert err.errorCode == p.ErrorCode.PASSWORD_INVALID
            assert "no admin password is configured" in err.message
        assert queue in client.getQueueNames(context())


# -- configuration mistakes -----------------------------------------------------------------


def serve_with(names: Names, log: Path, **settings: str) -> tuple[int | None, str]:
    """Start `pinledger serve` with `settings` and wait until it exits or answers /health.
    Returns its exit code (None: it accepted the settings and served) and its output."""
    prefix, schema = names
    admin_port = free_port()
    env = dict(os.environ)
    env.update(
        PINLEDGER_TOPIC_PREFIX=prefix,
        PINLEDGER_SCHEMA=schema,
        PINLEDGER_PORT=str(free_port()),
        PINLEDGER_ADMIN_PORT=str(admin_port),
    )
    env.update(settings)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pinledger", "serve"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def settled() -> bool:
        if proc.poll() is not None:
            return True
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{admin_port}/health", timeout=2
            ) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    try:
        wait_for(settled, 60, pause=0.2)
        code = proc.poll()
    finally:
        stop_process(proc)
    return code, log.read_text(errors="replace")


def assert_refused(code: int | None, output: str, says: str) -> None:
    assert code is not None, f"the server started and served:\n{output[-2000:]}"
    assert code != 0
    assert "Traceback" not in output, f"a traceback, not a message:\n{output[-2000:]}"
    assert says.lower() in output.lower(), output


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        pytest.param("PINLEDGER_PORT", "abc", "port", id="port-not-a-number"),
        pytest.param("PINLEDGER_PORT", "70000", "port", id="port-out-of-range"),
        pytest.param("PINLEDGER_PARTITIONS", "0", "partitions", id="zero-partitions"),
        pytest.param("PINLEDGER_CLAIM_TIMEOUT_S", "inf", "claim_timeout_s", id="claim-timeout-inf"),
        pytest.param("PINLEDGER_SUCCEEDED_TTL_S", "nan", "succeeded_ttl_s", id="ttl-nan"),
    ],
)
def test_a_setting_the_server_cannot_use_stops_it_with_a_message(
    names: Names, tmp_path: Path, variable: str, value: str, says: str
) -> None:
    code, output = serve_with(names, tmp_path / "serve.log", **{variable: value})
    assert_refused(code, output, says)
    assert value in output


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param('{"queues": [', "not valid JSON", id="not-json"),
        pytest.param(
            '{"queues": [{"name": "q", "queueConfig": {"maxJobsPerSec": 1}}]}',
            "unknown key 'maxJobsPerSec'",
            id="misspelt-key",
        ),
        pytest.param(
            '{"queues": [{"name": "q", "queueConfig": {"maxJobsPerSecond": -1}}]}',
            "maxJobsPerSecond must be a number >= 0",
            id="negative-rate",
        ),
        pytest.param(None, "cannot read queue config", id="missing-file"),
    ],
)
def test_a_broken_queue_config_stops_the_server_with_a_message(
    names: Names, tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "queues.json"
    if content is not None:
        path.write_text(content)
    code, output = serve_with(names, tmp_path / "serve.log", PINLEDGER_QUEUE_CONFIG=str(path))
    assert_refused(code, output, says)
