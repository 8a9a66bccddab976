"""Our errors as PinLater sees them: the one place that maps them to an ErrorCode
(docs/decisions/0003-error-codes.md), and the `rpc` wrapper every method goes through,
which also times and counts the call."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from thriftpy2.thrift import TApplicationException

from pinledger.idl import pinlater
from pinledger.ledger.clock import Clock
from pinledger.ledger.commands import RefusalCode, Refused
from pinledger.ledger.descriptor import DescriptorError
from pinledger.ledger.log import LogError
from pinledger.projections.store import InvalidRegexError, StoreUnavailableError
from pinledger.service.observability import catalogue, telemetry
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

ErrorCode = pinlater.ErrorCode
F = TypeVar("F", bound=Callable[..., Any])


class ProjectionBehindError(Exception):
    """The projection did not reach what a read needs within the read wait."""

    def __init__(self, behind: dict[tuple[str, int], tuple[int, int]], wait_s: float) -> None:
        where = ", ".join(
            f"{topic}[{partition}] at offset {reached}, needs {needed + 1}"
            for (topic, partition), (reached, needed) in sorted(behind.items())
        )
        super().__init__(
            f"the projection is behind the log ({where}) after {wait_s:g} s "
            "(PINLEDGER_READ_WAIT_S): the partition's owner is gone, moving or catching "
            "up, or paused at a record its store refuses (its owner's /ready names it); "
            "retry in a few seconds"
        )


def pinlater_error(code: int, message: str) -> Exception:
    """A PinLaterException (thriftpy2 builds the class at run time, hence Exception)."""
    exc: Exception = pinlater.PinLaterException(errorCode=code, message=message)
    return exc


def refusal_code(code: RefusalCode) -> int:
    # PinLater has no "invalid argument" code; UNKNOWN with a message saying what is
    # wrong is what its clients already handle.
    return int(getattr(ErrorCode, code.name, ErrorCode.UNKNOWN))


class _Instrumented(Protocol):
    metrics: Metrics
    clock: Clock


def rpc(method: F) -> F:
    """Times and counts a method and turns failures into PinLater errors: a refusal
    into its ErrorCode, an unreachable Kafka or Postgres into SHARD_CONNECTION_FAILED,
    anything unexpected into an INTERNAL_ERROR application exception (an undeclared
    exception would make thriftpy2 drop the connection)."""
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: _Instrumented, *args: Any) -> Any:
        started = self.clock.monotonic()
        code = "ok"
        span = telemetry.start_rpc(name, args)  # None while tracing is off
        result = None
        try:
            result = method(self, *args)
            return result
        except pinlater.PinLaterException as exc:
            code = str(exc.errorCode)
            raise
        except Refused as exc:
            code = exc.code.name
            raise pinlater_error(refusal_code(exc.code), exc.message) from None
        except DescriptorError as exc:
            code = "descriptor"
            raise pinlater_error(ErrorCode.UNKNOWN, f"malformed job descriptor: {exc}") from None
        except InvalidRegexError as exc:
            code = "regex"
            raise pinlater_error(ErrorCode.UNKNOWN, str(exc)) from None
        except ProjectionBehindError as exc:
            code = "behind"
            raise pinlater_error(ErrorCode.SHARD_CONNECTION_FAILED, str(exc)) from None
        except (LogError, StoreUnavailableError) as exc:
            # Down, not wrong: the client may try again (on another server too).
            code = "shard"
            log.warning("%s failed: %s", name, exc)
            raise pinlater_error(
                ErrorCode.SHARD_CONNECTION_FAILED, f"storage unavailable: {exc}"
            ) from None
        except Exception as exc:
            code = "internal"
            log.exception("%s failed", name)
            raise TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"{name}: {type(exc).__name__}: {exc}"
            ) from None
        finally:
            self.metrics.count(catalogue.RPC_TOTAL, method=name)
            if code != "ok":
                self.metrics.count(catalogue.RPC_ERRORS_TOTAL, method=name, code=code)
            self.metrics.observe(
                catalogue.RPC_SECONDS, self.clock.monotonic() - started, method=name
            )
            if span is not None:
                telemetry.end_rpc(span, name, args, result, code)

    # functools.wraps keeps the signature at run time; mypy cannot see that it is F.
    return wrapper  # type: ignore[return-value]
