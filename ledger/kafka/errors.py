"""Every kafka-python error leaves the adapter as a LogError that says what was being
done and what to check; callers of the port never see a kafka-python type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafka.errors import (
    AuthorizationError,
    InvalidSessionTimeoutError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)

from pinledger.ledger.log import LogError


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
    if isinstance(exc, InvalidSessionTimeoutError):
        return (
            "Check the session timeout against the broker's group.min.session.timeout.ms "
            "and group.max.session.timeout.ms."
        )
    return "Check the broker's log."


def log_error(exc: Exception, what: str, bootstrap: str) -> LogError:
    """The LogError for `exc`, raised while doing `what` ("cannot append to ...")."""
    return LogError(f"{what}: {type(exc).__name__}: {exc}. {_hint(exc, bootstrap)}")


@contextmanager
def translated(what: str, bootstrap: str) -> Iterator[None]:
    """Raise any kafka-python error inside the block as a LogError."""
    try:
        yield
    except KafkaError as exc:
        raise log_error(exc, what, bootstrap) from exc
