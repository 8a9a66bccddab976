"""Fixtures for tests against the real Kafka, Postgres and MariaDB (`make stack-up`).

Each test gets its own topic prefix and store schema (a MariaDB database for the MySQL
store), so tests never see each other's queues or rows. The servers must be running: a
missing server fails the tests with a message saying how to start it, it never skips
them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.security.password import hash_password
from pinledger.service.testing.servers import ServerProcess, context, running
from tests.contract.store_fixtures import scratch, store, store_kind
from tests.integration.otlp_receiver import OtlpReceiver
from tests.settings import stack_settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def config() -> Config:
    return Config.from_env()


@pytest.fixture(scope="session")
def kafka(config: Config) -> Iterator[KafkaLog]:
    try:
        log = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id="pinledger-tests"))
        log.topics()
    except LogError as exc:
        pytest.fail(f"{exc}\n(the integration tests need the real broker: `make stack-up`)")
    yield log
    log.close()


@pytest.fixture
def prefix(kafka: KafkaLog) -> Iterator[str]:
    """A fresh topic prefix; the test's topics are deleted afterwards."""
    name = f"test{uuid.uuid4().hex[:10]}."
    yield name
    for topic in kafka.topics():
        if topic.startswith(name):
            kafka.delete_topic(topic)


# `store` and `scratch`: fresh stores of `store_kind` (Postgres unless a test about the
# store runs `@each_kind`), as in the contract suite.
__all__ = ["scratch", "store", "store_kind"]


@pytest.fixture
def writer(kafka: KafkaLog, prefix: str) -> LedgerWriter:
    return LedgerWriter(kafka, prefix)


# The admin password of test servers (deleteQueue).
ADMIN_PASSWORD = "let-me-delete"
ADMIN_SALT = "pepper"


def server_settings(**overrides: str) -> dict[str, str]:
    settings = {
        "PINLEDGER_ADMIN_SALT": ADMIN_SALT,
        "PINLEDGER_ADMIN_PASSWORD_SHA256": hash_password(ADMIN_PASSWORD, ADMIN_SALT),
    }
    settings.update(overrides)
    return settings


@pytest.fixture(scope="session")
def server(kafka: KafkaLog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `pinledger serve` process for the session, on its own topic prefix and
    schema; tests keep apart by using fresh queue names (`queue`)."""
    tag = uuid.uuid4().hex[:10]
    process = ServerProcess(prefix=f"srv{tag}.", schema=f"srv_{tag}", settings=server_settings())
    with running([process], tmp_path_factory.mktemp("server")):
        yield process
    for topic in kafka.topics():
        if topic.startswith(process.prefix):
            kafka.delete_topic(topic)
    Store(stack_settings().pg_dsn, process.schema).drop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Any]:
    connection = server.client()
    yield connection
    connection.close()


@pytest.fixture
def queue(client: Any) -> str:
    """A fresh queue on the session server."""
    name = f"q_{uuid.uuid4().hex[:12]}"
    client.createQueue(context(), name)
    return name


Names = tuple[str, str]  # (topic prefix, Postgres schema) of one test's servers


@pytest.fixture
def names(kafka: KafkaLog, config: Config) -> Iterator[Names]:
    """A fresh topic prefix and schema for a test's own servers; the topics and the
    schema are dropped afterwards."""
    tag = uuid.uuid4().hex[:10]
    prefix, schema = f"ops{tag}.", f"ops_{tag}"
    yield prefix, schema
    for topic in kafka.topics():
        if topic.startswith(prefix):
            kafka.delete_topic(topic)
    Store(config.pg_dsn, schema).drop()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    """An OTLP/HTTP trace receiver on loopback (otlp_receiver.py), stopped afterwards."""
    server = OtlpReceiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
