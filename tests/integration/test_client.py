"""The Python client against a real server: typed helpers for every method, errors
carrying PinLater's ErrorCode, failover across a server list, pooled connections that
survive a server restart, and no blind retry of calls that are not safe to repeat."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinledger.client import (
    Ack,
    Checkpoint,
    ErrorCode,
    Job,
    JobState,
    PinLaterClient,
    PinLaterError,
    ServerUnavailableError,
    after_ms,
)
from pinledger.projections.pg.store import Store
from pinledger.service.testing.servers import ServerProcess, free_port, running, wait_for
from tests.integration.conftest import ADMIN_PASSWORD, server_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def pl(server: ServerProcess) -> Iterator[PinLaterClient]:
    with PinLaterClient(f"127.0.0.1:{server.port}", source="client-tests:host") as client:
        yield client


@pytest.fixture
def queue(pl: PinLaterClient) -> str:
    name = f"c_{uuid.uuid4().hex[:12]}"
    pl.create_queue(name)
    return name


def test_a_job_goes_through_every_typed_helper(pl: PinLaterClient, queue: str) -> None:
    assert queue in pl.queue_names()
    urgent, later = pl.enqueue(
        queue,
        [Job(b"urgent", priority=1, attempts_allowed=3), Job(b"later", priority=2)],
    )
    delayed = pl.enqueue_one(queue, b"tomorrow", run_after_ms=after_ms(86_400))

    first = wait_for(lambda: pl.dequeue(queue, 1))
    assert [(j.descriptor, j.body, j.attempt, j.attempts_allowed) for j in first] == [
        (urgent, b"urgent", 1, 3)
    ]
    pl.checkpoint(queue, [Checkpoint(urgent, new_body="rewritten", prepend_status="half way")])
    pl.ack(queue, failed=[Ack(urgent, append_status="boom", retry_delay_ms=60_000)])

    second = pl.dequeue(queue, 10, succeeded=[])
    assert [j.descriptor for j in second] == [later]
    pl.ack(queue, succeeded=[Ack(later, append_status="done")])

    info = pl.lookup([urgent, later, delayed], include_body=True)
    assert info[urgent].state is JobState.PENDING
    assert info[urgent].body == b"rewritten"
    assert info[urgent].attempts_remaining == 2
    assert "boom" in info[urgent].custom_status and "half way" in info[urgent].custom_status
    run_after, updated_at = info[urgent].run_after_ms, info[urgent].updated_at_ms
    assert run_after is not None and updated_at is not None
    assert run_after - updated_at == 60_000
    assert info[later].state is JobState.SUCCEEDED and info[later].custom_status == "done"
    assert info[delayed].state is JobState.PENDING and info[delayed].claim is None

    assert pl.count(queue, JobState.SUCCEEDED) == 1
    assert pl.count(queue, JobState.PENDING, count_future=True) == 2
    assert pl.count(queue, JobState.PENDING, count_future=True, body_regex="^tom") == 1
    page = pl.scan(queue, JobState.PENDING, future=True, limit=1)
    assert len(page.jobs) == 1 and page.more
    rest = pl.scan(queue, JobState.PENDING, future=True, continuation=page.continuation)
    assert {j.descriptor for j in page.jobs + rest.jobs} == {urgent, delayed}
    assert not rest.more

    assert pl.delete_jobs(queue, JobState.SUCCEEDED) == 0  # PinLater: priority 1 unless told
    assert pl.delete_jobs(queue, JobState.SUCCEEDED, priority=2) == 1
    pl.delete_queue(queue, ADMIN_PASSWORD)
    assert queue not in pl.queue_names()


def test_failed_jobs_can_be_retried(pl: PinLaterClient, queue: str) -> None:
    [only] = pl.enqueue(queue, [Job(b"once", attempts_allowed=1)])
    wait_for(lambda: pl.dequeue(queue, 1))
    pl.ack(queue, failed=[only])
    wait_for(lambda: pl.count(queue, JobState.FAILED) == 1)
    assert pl.retry_failed(queue, attempts=2) == 1
    assert pl.lookup([only])[only].state is JobState.PENDING


def test_refusals_carry_the_error_code(pl: PinLaterClient, queue: str) -> None:
    with pytest.raises(PinLaterError) as missing:
        pl.enqueue("no_such_queue", [Job(b"x")])
    assert missing.value.code is ErrorCode.QUEUE_NOT_FOUND
    assert "no_such_queue" in str(missing.value)
    with pytest.raises(PinLaterError) as password:
        pl.delete_queue(queue, "wrong")
    assert password.value.code is ErrorCode.PASSWORD_INVALID
    with pytest.raises(PinLaterError) as regex:
        pl.count(queue, JobState.PENDING, body_regex="(")
    assert regex.value.code is ErrorCode.UNKNOWN


def test_a_dead_server_in_the_list_is_skipped(server: ServerProcess, tmp_path: Path) -> None:
    dead = free_port()
    servers = tmp_path / "servers"
    servers.write_text(f"127.0.0.1:{dead}\n127.0.0.1:{server.port}\n")
    with PinLaterClient(str(servers), connect_timeout_s=1) as pl:
        name = f"c_{uuid.uuid4().hex[:12]}"
        for _ in range(4):  # the rotation starts on the dead one every other call
            pl.create_queue(name)
            [descriptor] = pl.enqueue(name, [Job(b"x")])
            assert descriptor.startswith(name)


def test_no_live_server_is_a_clear_error() -> None:
    dead = free_port()
    with (
        PinLaterClient(f"127.0.0.1:{dead}", retries=1, retry_backoff_s=0) as pl,
        pytest.raises(ServerUnavailableError, match=f"127.0.0.1:{dead}: cannot connect"),
    ):
        pl.queue_names()


def test_pooled_connections_survive_a_server_restart(
    prefix: str, store: Store, tmp_path: Path
) -> None:
    process = ServerProcess(prefix=prefix, schema=store.schema, settings=server_settings())
    with running([process], tmp_path), PinLaterClient(f"127.0.0.1:{process.port}") as pl:
        pl.create_queue("survivor")
        assert pl.queue_names() == {"survivor"}
        process.stop()
        process.start(tmp_path)
        # The pooled connection died with the old process; the client notices before
        # sending, so even a call that is not safe to repeat goes through.
        assert pl.enqueue("survivor", [Job(b"after restart")])
        assert pl.queue_names() == {"survivor"}


class _HangUp:
    """A TCP server that reads a request and closes the connection without answering:
    the call may or may not have been applied."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.calls = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            with connection:
                if connection.recv(65536):
                    self.calls += 1

    def close(self) -> None:
        self.sock.close()


def test_calls_not_safe_to_repeat_are_not_retried_after_they_were_sent(
    server: ServerProcess,
) -> None:
    hang_up = _HangUp()
    try:
        servers = [f"127.0.0.1:{hang_up.port}", f"127.0.0.1:{server.port}"]
        with PinLaterClient(servers, retry_backoff_s=0) as pl:
            with pytest.raises(ServerUnavailableError, match="may or may not have been applied"):
                pl.enqueue("anything", [Job(b"x")])
            assert hang_up.calls == 1
            # A lookup is safe to repeat: it moves on to the live server.
            names = [pl.queue_names() for _ in range(2)]
            assert all(isinstance(n, set) for n in names)
            assert hang_up.calls == 2
    finally:
        hang_up.close()
