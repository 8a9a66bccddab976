"""Time as pinledger shows and reads it: epoch milliseconds, UTC.

Events carry epoch milliseconds; every place that prints one or reads one from a
person (the command line, traces, the as-of replay) goes through these two functions,
so a time looks the same and parses the same everywhere.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)


def format_ms(ms: int | None, zulu: bool = False) -> str:
    """`2026-11-23 02:15:00.123` (UTC; with a trailing Z when `zulu`), `-` for None."""
    if ms is None:
        return "-"
    # Integer arithmetic: ms / 1000 as a float is off by one millisecond for some times.
    text = (EPOCH + ms * ONE_MS).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return text + "Z" if zulu else text


def parse_ms(text: str) -> int:
    """Milliseconds since the epoch from digits or an ISO-8601 time (UTC unless it says
    otherwise). Raises ValueError naming the text and what was expected."""
    if text.isdigit():
        return int(text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: expected milliseconds since the epoch or an ISO-8601 "
            "time such as 2026-11-23T02:15:00 (UTC unless it says otherwise)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return (parsed - EPOCH) // ONE_MS
