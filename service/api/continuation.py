"""scanJobs continuations: "0" starts a scan, "-1" says there is nothing after, and
any other token is where a previous page ended (run_after.partition.local_id)."""

from __future__ import annotations

from typing import Any

from pinledger.idl import pinlater
from pinledger.ledger import limits
from pinledger.projections.store import ScanKey
from pinledger.service.api.errors import pinlater_error

CONTINUATION_START: str = pinlater.CONTINUATION_START
CONTINUATION_END: str = pinlater.CONTINUATION_END


def _invalid(why: str) -> Exception:
    return pinlater_error(
        pinlater.ErrorCode.CONTINUATION_INVALID, f'{why}; use "0" to start a scan'
    )


def parse_continuation(token: Any) -> ScanKey | None:
    """ "0" (or nothing) starts a scan; otherwise the token a previous page returned."""
    if token is None or token == CONTINUATION_START:
        return None
    wrong = limits.problem(limits.CONTINUATION, token)
    if wrong is not None:
        raise _invalid(f"continuation {wrong}")
    try:
        return ScanKey.from_token(token)
    except ValueError:
        raise _invalid(f"continuation {token!r} is not one this server returned") from None


def continuation_after(key: ScanKey) -> str:
    """The token `parse_continuation` reads back as `key`."""
    return key.token()
