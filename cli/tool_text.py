"""How `pinledger client` words what it prints on one line: a failed call, a job body."""

from __future__ import annotations

from pinledger.client.errors import ClientError, PinLaterError, ServerUnavailableError


def error_line(exc: BaseException) -> str:
    """One line naming what went wrong; PinLaterError carries `CODE: message (from …)`."""
    if isinstance(exc, PinLaterError):
        return str(exc)
    if isinstance(exc, ServerUnavailableError):
        # The client lists the failure of every round; one of each is enough here.
        head, sep, rest = str(exc).partition(" rounds: ")
        text = head + sep + "; ".join(dict.fromkeys(rest.split("; "))) if sep else str(exc)
        return f"cannot reach the server: {text} (is `pinledger serve` running there?)"
    if isinstance(exc, ClientError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def body_text(body: bytes | None, width: int = 60) -> str:
    if body is None:
        return "-"
    text = repr(body)
    return text if len(text) <= width else text[: width - 3] + "..."
