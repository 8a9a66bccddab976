"""librdkafka's configuration of each client of the adapter, from the same KafkaSettings
the kafka-python adapter takes, setting for setting where both have one."""

from __future__ import annotations

import logging
from typing import Any

from pinledger.ledger.kafka.reader import FETCH_MAX_BYTES, MAX_PARTITION_FETCH_BYTES
from pinledger.ledger.kafka.settings import MAX_RECORD_BYTES, KafkaSettings
from pinledger.ledger.log import SecurityNames

# librdkafka's own log lines, through Python's logging: they are handed over by the
# client's poll (the producer's poll thread, a reader's poll).
LIBRDKAFKA_LOG = logging.getLogger("pinledger.ledger.rdkafka.librdkafka")


def connection(settings: KafkaSettings) -> dict[str, Any]:
    """What every librdkafka client of the adapter is built with."""
    return {
        "bootstrap.servers": settings.bootstrap,
        # librdkafka's default is 10 s; the kafka-python adapter's is 1 s, as Java's.
        "reconnect.backoff.max.ms": settings.reconnect_backoff_max_ms,
        # A queue is a topic only createQueue makes: no request for a deleted queue
        # may bring its topic back on a broker with auto.create.topics.enable.
        "allow.auto.create.topics": False,
        # librdkafka leaves Nagle on; kafka-python sets TCP_NODELAY. With linger 0 an
        # append is one small request, which Nagle would hold behind an unacknowledged one.
        "socket.nagle.disable": True,
        **settings.security.options(LIBRDKAFKA),
    }


# librdkafka's names of the security settings: the protocol in lower case, the hostname
# check as its endpoint identification algorithm.
LIBRDKAFKA = SecurityNames(
    protocol="security.protocol",
    mechanism="sasl.mechanism",
    username="sasl.username",
    password="sasl.password",
    check_hostname="ssl.endpoint.identification.algorithm",
    cafile="ssl.ca.location",
    certfile="ssl.certificate.location",
    keyfile="ssl.key.location",
    protocol_value=str.lower,
    check_hostname_value=lambda check: "https" if check else "none",
)


def producer(settings: KafkaSettings) -> dict[str, Any]:
    return {
        **connection(settings),
        "client.id": settings.client_id,
        "logger": LIBRDKAFKA_LOG,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": settings.linger_ms,
        "batch.size": settings.batch_size,
        # librdkafka checks a record with its overhead against this, as kafka-python
        # checks it against max_request_size: the same limit in both adapters.
        "message.max.bytes": MAX_RECORD_BYTES,
        # As the kafka-python adapter: leaves time for a retry within the append timeout.
        "request.timeout.ms": min(settings.request_timeout_ms, settings.append_timeout_ms // 2),
        # No longer than `append` waits: a record not acknowledged by then is failed by
        # librdkafka (an append to a deleted topic included) instead of kept queued.
        "message.timeout.ms": settings.append_timeout_ms,
    }


def reader(settings: KafkaSettings) -> dict[str, Any]:
    return {
        **connection(settings),
        "client.id": f"{settings.client_id}-reader",
        "logger": LIBRDKAFKA_LOG,
        # confluent-kafka refuses a consumer without a group id, even one that is only
        # assigned partitions: this one never joins it and never commits to it.
        "group.id": f"{settings.client_id}-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # The kafka-python reader's fetch sizes; librdkafka prefetches up to
        # queued.max.messages.kbytes per consumer (64 MiB by default): bounded the same.
        "max.partition.fetch.bytes": MAX_PARTITION_FETCH_BYTES,
        "fetch.max.bytes": FETCH_MAX_BYTES,
        "queued.max.messages.kbytes": FETCH_MAX_BYTES // 1024,
    }
