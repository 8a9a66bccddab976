"""Keyset page tokens for the dashboard's lists: `<run_after>.<partition>.<local_id>` of
the last row shown (the same key scanJobs continues from), so a page never repeats or
skips a row that did not move, however deep the list."""

from __future__ import annotations

from pinledger.projections.store import JobRow, ScanKey

# A token's numbers must fit the columns they are compared with (bigint, integer).
_I64 = 2**63
_I32 = 2**31


class PageTokenError(ValueError):
    """A token this dashboard did not hand out."""


def token_after(row: JobRow) -> str:
    """The token of the page that starts after `row`."""
    return f"{row.job.run_after}.{row.partition}.{row.job.local_id}"


def parse_token(token: str | None) -> ScanKey | None:
    """None (the first page) for an empty token, else where the previous page ended."""
    if not token:
        return None
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        run_after, partition, local_id = (int(p) for p in parts)
        if not (0 <= partition < _I32 and 0 <= local_id < _I64 and -_I64 <= run_after < _I64):
            raise ValueError
    except ValueError:
        raise PageTokenError(f"page token {token!r} is not one this dashboard made") from None
    return ScanKey(run_after, partition, local_id)


def page(rows: list[JobRow], size: int) -> tuple[list[JobRow], str | None]:
    """The rows of a page read with a LIMIT of `size + 1`, and the next page's token
    (None: this is the last page)."""
    shown = rows[:size]
    if len(rows) > size and shown:
        return shown, token_after(shown[-1])
    return shown, None
