"""Every confluent-kafka error leaves the adapter as a LogError that says what was being
done and what to check, with the same hints as the kafka-python adapter's
(ledger/kafka/errors.py); callers of the port never see a confluent-kafka type.

librdkafka reports a failure as a `KafkaError` (a code and a text), raised inside a
`KafkaException`, handed to a delivery report, or set on a consumed message."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from pinledger.ledger.kafka.settings import MAX_RECORD_BYTES
from pinledger.ledger.log import LogError, NotAppendedError, RecordTooLargeError

# librdkafka's codes for "no broker answered in time" (local codes start with _).
UNREACHABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)
# The topic (or the partition) is not there: a queue deleted meanwhile.
UNKNOWN_TOPIC = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
_UNAUTHORIZED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)


def _hint(error: KafkaError, bootstrap: str) -> str:
    """What to check, by the kind of failure."""
    code = error.code()
    if code in UNREACHABLE:
        return (
            f"Check that the broker at {bootstrap} is running and not overloaded: start "
            "it with `make stack-up`, or point PINLEDGER_KAFKA at your broker."
        )
    if code in UNKNOWN_TOPIC:
        return "The topic does not exist: its queue may have been deleted meanwhile."
    if code == KafkaError._UNKNOWN_PARTITION:
        return "The topic has no such partition: check the queue's partition count."
    if code in _UNAUTHORIZED:
        return "The broker refused this client: check its ACLs."
    if code == KafkaError.MSG_SIZE_TOO_LARGE:
        return (
            f"The record is over what the topic takes (max.message.bytes) or the producer "
            f"sends ({MAX_RECORD_BYTES} bytes): check PINLEDGER_MAX_RECORD_BYTES against "
            "the topic's max.message.bytes."
        )
    if error.fatal():
        return "librdkafka cannot go on with this producer: it is replaced; check the broker's log."
    return "Check the broker's log."


def error_of(exc: KafkaException) -> KafkaError:
    """The KafkaError a KafkaException carries (confluent-kafka puts it first in args)."""
    first = exc.args[0] if exc.args else None
    if isinstance(first, KafkaError):
        return first
    return KafkaError(KafkaError._FAIL, str(exc))


# A record's delivery failed and it is certainly not in the log: the broker refused it
# (its size does not change between attempts, so no earlier attempt landed), or
# librdkafka dropped it before sending it (a topic or partition it knows is missing, a
# purge of what was still queued).
REFUSED = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,  # librdkafka's own refusal has the broker's code
        KafkaError.TOPIC_EXCEPTION,  # an invalid topic name
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._PURGE_QUEUE,
    }
)


def log_error(
    error: KafkaError, what: str, bootstrap: str, kind: type[LogError] = LogError
) -> LogError:
    """The LogError (or `kind` of one) for `error`, met while doing `what` ("cannot
    append to ...")."""
    return kind(f"{what}: {error.name()}: {error.str()}. {_hint(error, bootstrap)}")


def unwritten(error: KafkaError) -> type[NotAppendedError]:
    """The error that says an append wrote nothing, for the `error` of a record that
    was never sent or that the broker refused."""
    return (
        RecordTooLargeError if error.code() == KafkaError.MSG_SIZE_TOO_LARGE else NotAppendedError
    )


def timed_out(what: str, bootstrap: str, seconds: float) -> LogError:
    """The LogError for an answer that did not come within `seconds`."""
    return log_error(
        KafkaError(KafkaError._TIMED_OUT, f"no answer within {seconds:g} s"), what, bootstrap
    )
