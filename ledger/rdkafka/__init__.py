"""The librdkafka adapter of the log port (ledger/log.py): the only code that imports
confluent-kafka. log (RdkafkaLog), producer (the appends and the thread that answers
them), reader (the plain partition reader), config (librdkafka's settings from
KafkaSettings) and errors (every confluent-kafka error becomes LogError). Group
membership and the admin calls (topics, offsets, the cluster's state) are the
kafka-python adapter's (docs/decisions/0021-librdkafka-adapter.md)."""

from pinledger.ledger.rdkafka.log import RdkafkaLog

__all__ = ["RdkafkaLog"]
