"""The Thrift edge under bad or too many connections (service/api/connections.py):
a bounded number served at once with a clear refusal past it, idle connections
closed, an oversized call answered with its size and the limit, and garbage logged in
a few lines, never a traceback per frame."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from thriftpy2.thrift import TApplicationException

from pinledger.client import JobState, PinLaterClient
from pinledger.idl import pinlater as p
from pinledger.service.testing.servers import connect, context
from tests.integration.conftest import Names
from tests.integration.test_api import count, enqueue, job
from tests.integration.test_operations import (
    PENDING,
    closed_by_server,
    new_queue,
    raw,
    serving,
)


def test_past_the_connection_limit_a_call_is_refused_clearly(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path, PINLEDGER_MAX_CONNECTIONS="2") as (server, client):
        queue = new_queue(client)  # `client` holds the first connection
        second = connect(server.port)
        enqueue(second, queue, job())
        third = connect(server.port, timeout_ms=10_000)
        try:
            with pytest.raises(TApplicationException) as refused:
                enqueue(third, queue, job())
            assert "server busy: 2 connections open" in str(refused.value)
            assert "nothing was applied" in str(refused.value)
        finally:
            third.close()
        second.close()
        # A slot is free again: a new connection is served.
        fourth = None
        deadline = time.monotonic() + 10
        while fourth is None:
            candidate = connect(server.port)
            try:
                enqueue(candidate, queue, job())
                fourth = candidate
            except TApplicationException:
                candidate.close()
                assert time.monotonic() < deadline, "the freed slot was never reused"
                time.sleep(0.1)
        fourth.close()
        assert count(client, queue, PENDING) == 2
        assert "refused a connection from" in server.log()


def test_idle_connections_are_closed_and_clients_reconnect(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path, PINLEDGER_IDLE_TIMEOUT_S="0.5") as (server, _client):
        with raw(server.port) as sock:
            assert closed_by_server(sock)  # sent nothing for longer than the timeout
        with PinLaterClient(f"127.0.0.1:{server.port}") as pl:
            queue = f"q_idle_{time.monotonic_ns() % 10**8}"
            pl.create_queue(queue)
            time.sleep(1.0)  # the pooled connection is closed by the server meanwhile
            pl.enqueue_one(queue, b"after idle")  # the pool notices and reconnects
            assert pl.count(queue, JobState.PENDING) == 1


def test_an_oversized_enqueue_is_answered_with_its_size_and_the_limit(
    names: Names, tmp_path: Path
) -> None:
    limit = 1_000_000
    with serving(names, tmp_path, PINLEDGER_MAX_FRAME_BYTES=str(limit)) as (server, client):
        queue = new_queue(client)
        big = connect(server.port)
        try:
            with pytest.raises(p.PinLaterException) as rejected:
                # 40 jobs of 40 KB: a 1.6 MB frame (each body alone is fine).
                enqueue(big, queue, *[job(body=b"x" * 40_000) for _ in range(40)])
        finally:
            big.close()
        assert rejected.value.errorCode == p.ErrorCode.ENQUEUE_REJECTED
        assert f"over the server's frame limit of {limit} bytes" in rejected.value.message
        assert "nothing was applied" in rejected.value.message
        assert count(client, queue, PENDING) == 0
        log = server.log()
        assert f"(limit {limit} bytes, PINLEDGER_MAX_FRAME_BYTES): answered enqueueJobs" in log
        # Garbage announcing a huge frame is closed at once, with one line too.
        with raw(server.port) as sock:
            sock.sendall(struct.pack(">i", 2**31 - 1) + b"GET / HTTP/1.1")
            assert closed_by_server(sock)
        enqueue(client, queue, job())
        assert count(client, queue, PENDING) == 1


def test_garbage_is_a_few_log_lines_not_a_traceback_each(names: Names, tmp_path: Path) -> None:
    with serving(names, tmp_path) as (server, client):
        for _ in range(40):
            with raw(server.port) as sock:
                # A well-framed payload that is not a Thrift message.
                sock.sendall(struct.pack(">i", 20) + b"\xde\xad\xbe\xef" * 5)
                sock.shutdown(socket.SHUT_WR)
                assert closed_by_server(sock)
        client.getQueueNames(context())  # still serving
        log = server.log()
        lines = log.count("not a PinLater call")
        assert 1 <= lines <= 10, log[-5000:]
        assert "Traceback" not in log
