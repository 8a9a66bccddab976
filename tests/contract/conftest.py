"""Fixtures of the contract suite: every port's tests run against the real adapter and
against the in-memory fake, so the fake behaves as the contract says and the tests that
use it mean something.

The real variants are marked `integration` and need the servers (`make stack-up`): a
missing server fails them with a message, it never skips them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import Log, LogError
from pinledger.service.testing.fake_log import FakeLog
from tests.contract.store_fixtures import ALL_KINDS
from tests.settings import stack_settings

# -- the store port -------------------------------------------------------------------


@pytest.fixture(params=ALL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Every store test of the contract runs on each real store and on the FakeStore."""
    kind: str = request.param
    return kind


# -- the log port ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_log() -> Iterator[KafkaLog]:
    """The real adapter, on the broker of PINLEDGER_KAFKA."""
    try:
        log = KafkaLog(
            KafkaSettings(bootstrap=stack_settings().kafka, client_id="pinledger-contract")
        )
        log.topics()
    except LogError as exc:
        pytest.fail(f"{exc}\n(the contract suite's kafka variant needs the broker: make stack-up)")
    yield log
    log.close()


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.integration), "fake"])
def log(request: pytest.FixtureRequest) -> Iterator[Log]:
    """The Log under test: the Kafka adapter or the FakeLog."""
    if request.param == "fake":
        fake = FakeLog()
        yield fake
        fake.close()
    else:
        yield request.getfixturevalue("kafka_log")


@pytest.fixture
def prefix(log: Log) -> Iterator[str]:
    """A fresh topic prefix; the test's topics are deleted afterwards."""
    name = f"contract{uuid.uuid4().hex[:10]}."
    yield name
    for topic in log.topics():
        if topic.startswith(name):
            log.delete_topic(topic)
