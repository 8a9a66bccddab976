"""The Kafka adapter of the log port (ledger/log.py): the only code that imports
kafka-python. settings (KafkaSettings), log (KafkaLog: the producer), admin (KafkaAdmin:
topics, offsets, the cluster's state, groups' members; both adapters ask it), reader
(the plain partition reader), group (the owners' group member and the subscriber),
membership (group membership alone, which the librdkafka adapter delegates here), errors
(every kafka-python error becomes LogError) and patches (every access to kafka-python's
internals, behind a version check)."""

from pinledger.ledger.kafka.admin import KafkaAdmin
from pinledger.ledger.kafka.group import KafkaGroupReader, KafkaSubscriber
from pinledger.ledger.kafka.log import KafkaLog
from pinledger.ledger.kafka.membership import KafkaGroupMembership
from pinledger.ledger.kafka.patches import TESTED_KAFKA_PYTHON, check_kafka_python
from pinledger.ledger.kafka.reader import KafkaReader
from pinledger.ledger.kafka.settings import MAX_RECORD_BYTES, KafkaSettings

__all__ = [
    "MAX_RECORD_BYTES",
    "TESTED_KAFKA_PYTHON",
    "KafkaAdmin",
    "KafkaGroupMembership",
    "KafkaGroupReader",
    "KafkaLog",
    "KafkaReader",
    "KafkaSettings",
    "KafkaSubscriber",
    "check_kafka_python",
]
