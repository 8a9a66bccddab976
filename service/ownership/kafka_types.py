"""The Kafka adapter types the ownership room uses, named in this one place.

The owners need more from the log than the `Log` port offers today: a group reader
(subscribe, poll, seek, assignment, rejoin), the group's members, end offsets and topic
existence. Until the port covers them, the room uses the Kafka adapter directly, and
only this module imports it: switching the room to the port's protocols is a change of
these two names.
"""

from __future__ import annotations

from typing import TypeAlias

from pinledger.ledger.kafka.log import KafkaGroupReader, KafkaLog

# What the owners ask of the log: the group reader factory, group members, end offsets,
# topic existence and the producer's forgetting of deleted topics.
GroupLog: TypeAlias = KafkaLog
# This server's member of the owners' group.
GroupReader: TypeAlias = KafkaGroupReader

__all__ = ["GroupLog", "GroupReader"]
