"""Job descriptors: `queue:s<partition>:p<priority>:<local_id>`.

A descriptor is the only routing information a PinLater client holds, so it carries
everything needed to find the job: the queue (a Kafka topic), the partition the job
lives in for life, its priority, and a local id derived from the Kafka offset of the
record that enqueued it (see `local_id_for`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Queue names are PinLater's `\w+`, ASCII only so they are valid Kafka topic names too.
QUEUE_NAME_RE = re.compile(r"[A-Za-z0-9_]+")
# PinLater's limit "came out near 58 characters" (MySQL table name prefixes); ours is
# documented and leaves room for the topic prefix within Kafka's 249.
MAX_QUEUE_NAME_LENGTH = 64

# An enqueue record holds up to this many jobs; job i of the record at offset o has
# local id o * JOBS_PER_RECORD + i, which reads back as "offset, index" in decimal.
JOBS_PER_RECORD = 1000

# Every number in a descriptor is stored as a Postgres bigint (19 digits at most); a
# longer token cannot name a job, and int() refuses past 4300 digits anyway.
MAX_NUMBER_DIGITS = 19


class DescriptorError(ValueError):
    """A job descriptor that cannot be parsed; the message says what is wrong."""


@dataclass(frozen=True, slots=True, order=True)
class JobDescriptor:
    queue: str
    partition: int
    priority: int
    local_id: int

    def __str__(self) -> str:
        return f"{self.queue}:s{self.partition}:p{self.priority}:{self.local_id}"

    @property
    def offset(self) -> int:
        """Offset of the record that enqueued the job."""
        return self.local_id // JOBS_PER_RECORD

    @property
    def index(self) -> int:
        """Position of the job within its enqueue record."""
        return self.local_id % JOBS_PER_RECORD


def local_id_for(offset: int, index: int) -> int:
    if not 0 <= index < JOBS_PER_RECORD:
        raise ValueError(f"job index {index} outside 0..{JOBS_PER_RECORD - 1}")
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    return offset * JOBS_PER_RECORD + index


def _number(token: str, prefix: str, what: str, text: str) -> int:
    digits = token[len(prefix) :] if prefix else token
    if not token.startswith(prefix) or not digits.isascii() or not digits.isdigit():
        expected = f"'{prefix}' followed by digits" if prefix else "digits"
        raise DescriptorError(
            f"job descriptor {text!r}: the {what} token {token!r} should be {expected}; "
            "expected queue:s<partition>:p<priority>:<local_id>"
        )
    if len(digits) > MAX_NUMBER_DIGITS:
        raise DescriptorError(
            f"job descriptor {text!r}: the {what} has {len(digits)} digits, "
            f"at most {MAX_NUMBER_DIGITS} are allowed"
        )
    return int(digits)


def parse(text: str) -> JobDescriptor:
    """Parse a descriptor, raising DescriptorError with a message a user can act on."""
    tokens = text.split(":")
    if len(tokens) != 4:
        raise DescriptorError(
            f"job descriptor {text!r} has {len(tokens)} ':'-separated tokens, expected 4: "
            "queue:s<partition>:p<priority>:<local_id>"
        )
    queue, shard, priority, local_id = tokens
    if not QUEUE_NAME_RE.fullmatch(queue):
        raise DescriptorError(
            f"job descriptor {text!r}: queue name {queue!r} must be letters, digits or '_'"
        )
    return JobDescriptor(
        queue=queue,
        partition=_number(shard, "s", "partition", text),
        priority=_number(priority, "p", "priority", text),
        local_id=_number(local_id, "", "local id", text),
    )
