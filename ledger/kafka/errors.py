"""Every kafka-python error leaves the adapter as a LogError that says what was being
done and what to check; callers of the port never see a kafka-python type.

kafka-python logs why each connection attempt failed (a refused SASL login, an
untrusted certificate) and, when none succeeds in time, raises "Unable to bootstrap"
without the reason. Around the admin client's calls, the first contact with Kafka of
every process and the health probe's, `translated(..., explained=True)` keeps those log
records instead of printing them (with their tracebacks, once per retry) and puts the
most telling one, with what to check, into the one LogError."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from kafka.errors import (
    AuthorizationError,
    InvalidSessionTimeoutError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)

from pinledger.ledger.kafka.diagnosis import tls_problem
from pinledger.ledger.log import KafkaSecurity, LogError


def _hint(exc: Exception, bootstrap: str) -> str:
    """What to check, by the kind of failure."""
    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError | RequestTimedOutError):
        # kafka-python reports an unreachable broker as a timeout ("Unable to bootstrap").
        return (
            f"Check that the broker at {bootstrap} is running and not overloaded: start "
            "it with `make stack-up`, or point PINLEDGER_KAFKA at your broker."
        )
    if isinstance(exc, UnknownTopicOrPartitionError):
        return "The topic does not exist: its queue may have been deleted meanwhile."
    if isinstance(exc, AuthorizationError):
        return "The broker refused this client: check its ACLs."
    if isinstance(exc, MessageSizeTooLargeError):
        return (
            "The record is over what the topic takes (max.message.bytes) or the "
            "producer sends: check PINLEDGER_MAX_RECORD_BYTES against the topic's setting."
        )
    if isinstance(exc, InvalidSessionTimeoutError):
        return (
            "The broker refuses PINLEDGER_SESSION_TIMEOUT_MS: it must lie between the "
            "broker's group.min.session.timeout.ms (6000 by default) and "
            "group.max.session.timeout.ms; raise the setting, or lower the broker's minimum "
            "(docs/decisions/0039-failover.md)."
        )
    return "Check the broker's log."


def log_error(
    exc: Exception, what: str, bootstrap: str, kind: type[LogError] = LogError
) -> LogError:
    """The LogError (or `kind` of one) for `exc`, raised while doing `what` ("cannot
    append to ...")."""
    return kind(f"{what}: {type(exc).__name__}: {exc}. {_hint(exc, bootstrap)}")


# The loggers kafka-python reports failed connection attempts on.
_CONNECTION_LOGGERS = ("kafka.net.manager", "kafka.net.connection", "kafka.net.transport")
# What a connection failure's log line holds, and what the user should check; the first
# that matches, in this order, explains the failure.
_CAUSES = (
    (
        "SaslAuthenticationFailed",
        "the broker refused the SASL login: check PINLEDGER_KAFKA_SASL_USERNAME, "
        "PINLEDGER_KAFKA_SASL_PASSWORD and PINLEDGER_KAFKA_SASL_MECHANISM",
    ),
    (
        "UnsupportedSaslMechanism",
        "the broker does not offer this SASL mechanism: check PINLEDGER_KAFKA_SASL_MECHANISM",
    ),
    (
        "CERTIFICATE_VERIFY_FAILED",
        "this client does not trust the broker's certificate: set PINLEDGER_KAFKA_SSL_CAFILE "
        "to the CA that signed it (a certificate that does not name the host in "
        "PINLEDGER_KAFKA is refused too)",
    ),
    (
        "ALERT_BAD_CERTIFICATE|ALERT_CERTIFICATE_REQUIRED|ALERT_UNKNOWN_CA|CERTIFICATE_REQUIRED",
        "the broker refused this client's certificate, or wants one: set "
        "PINLEDGER_KAFKA_SSL_CERTFILE and PINLEDGER_KAFKA_SSL_KEYFILE to a certificate "
        "signed by a CA the broker trusts",
    ),
    (
        "WRONG_VERSION_NUMBER|RECORD_LAYER_FAILURE",
        "the listener does not speak TLS: check PINLEDGER_KAFKA_SECURITY_PROTOCOL",
    ),
    (
        "Invalid frame length",
        "the listener expects TLS (and perhaps SASL): check PINLEDGER_KAFKA_SECURITY_PROTOCOL",
    ),
)


# A connection lost after it learned the broker's version (its first exchange), on a
# bootstrap that never completed: with SASL, lost during the login that follows it.
_LOST_AT_LOGIN = re.compile(
    r"broker_version=\(\d.*Connection lost: KafkaConnectionError: socket disconnected"
)
_CLOSED_AT_LOGIN = (
    "the broker closed each connection during the SASL login (after the connection's "
    "version exchange), as it does when it refuses a login (kafka-python did not read "
    "its answer in time): check PINLEDGER_KAFKA_SASL_USERNAME, "
    "PINLEDGER_KAFKA_SASL_PASSWORD and PINLEDGER_KAFKA_SASL_MECHANISM"
)


def closed_at_login(messages: list[str]) -> str | None:
    """Why a SASL bootstrap failed when no log line says (explanation() found nothing):
    the broker answers a refused login and closes the connection, and kafka-python often
    sees the close first ("socket disconnected"); under load, every attempt within the
    bootstrap timeout did (seen in CI, then on a CPU-starved machine: 12 of 12)."""
    if any(_LOST_AT_LOGIN.search(message) for message in messages):
        return _CLOSED_AT_LOGIN
    return None


class _Kept(logging.Filter):
    """Keeps the connection loggers' warnings and errors (a failed attempt, each with its
    traceback) instead of letting them print; their debug lines (`pinledger -v`) pass."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if len(self.messages) < 200:
            self.messages.append(record.getMessage())
        return False


def explanation(messages: list[str]) -> str | None:
    """Why the connection attempts failed, from kafka-python's log lines: what to check
    and the broker's answer, or None when no line says."""
    for markers, advice in _CAUSES:
        for message in messages:
            if any(marker in message for marker in markers.split("|")):
                said = message.rpartition("Connection lost: ")[2] or message
                return f"{advice} (the connection failed with: {said[:300]})"
    return None


@contextmanager
def translated(what: str, bootstrap: str, explained: KafkaSecurity | None = None) -> Iterator[None]:
    """Raise any kafka-python error inside the block as a LogError. With `explained`
    (the client's security settings): with the reason kafka-python logged for failed
    connection attempts, or else a TLS probe's (diagnosis.py), if any."""
    kept = _Kept()
    loggers = [logging.getLogger(n) for n in _CONNECTION_LOGGERS] if explained else []
    for logger in loggers:
        logger.addFilter(kept)
    try:
        yield
    except KafkaError as exc:
        reason = explanation(kept.messages)
        if reason is None and explained is not None and isinstance(exc, KafkaTimeoutError):
            reason = tls_problem(bootstrap, explained)
            if reason is None and explained.uses_sasl:
                reason = closed_at_login(kept.messages)
        if reason is None:
            raise log_error(exc, what, bootstrap) from exc
        raise LogError(f"{what}: {reason}") from exc
    finally:
        for logger in loggers:
            logger.removeFilter(kept)
