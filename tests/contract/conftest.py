"""Fixtures of the contract suite: every port's tests run against the real adapters and
against the in-memory fake, so the fake behaves as the contract says and the tests that
use it mean something.

The real variants are marked `integration` and need the servers (`make stack-up`): a
missing server fails them with a message, it never skips them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pinledger.ledger.adapters import KAFKA_PYTHON, LIBRDKAFKA, open_log
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.kafka import KafkaSettings
from pinledger.ledger.log import Log, LogError
from tests.contract.store_fixtures import ALL_KINDS
from tests.settings import stack_settings

# -- the store port -------------------------------------------------------------------


@pytest.fixture(params=ALL_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Every store test of the contract runs on each real store, on a sharded store and
    on the FakeStore, but on a kind its `not_applicable` mark names (with the reason)."""
    kind: str = request.param
    for mark in request.node.iter_markers("not_applicable"):
        if kind in mark.args:
            pytest.skip(f"not applicable to the {kind} store: {mark.kwargs['reason']}")
    return kind


# -- the log port ---------------------------------------------------------------------


def _real_log(client: str) -> Iterator[Log]:
    """A real adapter, on the broker of PINLEDGER_KAFKA."""
    try:
        log = open_log(
            KafkaSettings(bootstrap=stack_settings().kafka, client_id="pinledger-contract"), client
        )
        log.topics()
    except LogError as exc:
        pytest.fail(
            f"{exc}\n(the contract suite's {client} variant needs the broker: make stack-up)"
        )
    yield log
    log.close()


@pytest.fixture(scope="session")
def kafka_log() -> Iterator[Log]:
    """The kafka-python adapter."""
    yield from _real_log(KAFKA_PYTHON)


@pytest.fixture(scope="session")
def rdkafka_log() -> Iterator[Log]:
    """The librdkafka adapter (group membership delegated to kafka-python)."""
    yield from _real_log(LIBRDKAFKA)


@pytest.fixture(
    params=[
        pytest.param("kafka", marks=pytest.mark.integration),
        pytest.param("librdkafka", marks=pytest.mark.integration),
        "fake",
    ]
)
def log(request: pytest.FixtureRequest) -> Iterator[Log]:
    """The Log under test: the kafka-python adapter, the librdkafka adapter or the
    FakeLog."""
    if request.param == "fake":
        fake = FakeLog()
        yield fake
        fake.close()
    elif request.param == "librdkafka":
        yield request.getfixturevalue("rdkafka_log")
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
