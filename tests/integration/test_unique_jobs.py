"""Unique jobs on real servers (issue 42 part 1, decision 0037): clients of two servers
enqueue the same keys at once while one server is SIGKILLed; afterwards the queue holds
exactly one job per key, every caller was answered that job for each of its keys, and
the verify's fold of the log gives the projection the servers built."""

from __future__ import annotations

import random
import threading
import time
import uuid
from pathlib import Path

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.errors import ClientError
from pinledger.client.jobs import Job, JobState
from pinledger.ledger.log import Log
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.verify import verify
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, running, wait_for
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration

KEYS = [f"report:{i}" for i in range(120)]
CLIENTS = 6


def _enqueue_all(
    client: PinLaterClient, queue: str, seed: int, answers: dict[str, str], errors: list[str]
) -> None:
    """Every key, in batches of four in an order of this client's, each batch until
    answered (a caller whose answer timed out retries with the same keys)."""
    keys = list(KEYS)
    random.Random(seed).shuffle(keys)
    for start in range(0, len(keys), 4):
        batch = keys[start : start + 4]
        deadline = time.monotonic() + 60
        while True:
            try:
                found = client.enqueue(
                    queue, [Job(f"{key} from {seed}".encode(), unique_key=key) for key in batch]
                )
                break
            except (ClientError, OSError) as exc:
                if time.monotonic() > deadline:
                    errors.append(f"client {seed}: {batch}: {exc}")
                    return
                time.sleep(0.2)
        answers.update(zip(batch, found, strict=True))


def test_one_job_per_key_across_two_servers_while_one_is_killed(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    prefix, schema = names
    queue = f"unique_{uuid.uuid4().hex[:6]}"
    options = server_settings(PINLEDGER_PARTITIONS="4")
    servers = [ServerProcess(prefix=prefix, schema=schema, settings=options) for _ in range(2)]
    with running(servers, tmp_path):
        addresses = [f"127.0.0.1:{s.port}" for s in servers]
        clients = [PinLaterClient(addresses) for _ in range(CLIENTS)]
        try:
            clients[0].create_queue(queue)
            answers: list[dict[str, str]] = [{} for _ in range(CLIENTS)]
            errors: list[str] = []
            threads = [
                threading.Thread(target=_enqueue_all, args=(c, queue, i, answers[i], errors))
                for i, c in enumerate(clients)
            ]
            for thread in threads:
                thread.start()
            wait_for(lambda: sum(map(len, answers)) >= 40)
            servers[1].kill()  # mid-way: its partitions move to the other server
            at_kill = sum(map(len, answers))
            assert at_kill < CLIENTS * len(KEYS), "every enqueue was done before the kill"
            for thread in threads:
                thread.join(120)
            assert not errors, errors
            # Every caller was answered, for each key, the same job.
            for key in KEYS:
                assert len({a[key] for a in answers}) == 1, key
            holders = {key: answers[0][key] for key in KEYS}
            found = clients[0].lookup(holders.values())
            assert {info.unique_key for info in found.values()} == set(KEYS)
            assert all(info.state is JobState.PENDING for info in found.values())
            # Exactly one job per key: the queue holds nothing else.
            assert clients[0].count(queue, JobState.PENDING) == len(KEYS)
        finally:
            for client in clients:
                client.close()
    store = Store(config.pg_dsn, schema)
    try:
        report = verify(store, kafka, prefix, Scope())
    finally:
        store.close()
    assert report.identical, report.diffs
