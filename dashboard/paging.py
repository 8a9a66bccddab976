"""Keyset page tokens for the dashboard's lists: `<run_after>.<partition>.<local_id>` of
the last row shown (the same key scanJobs continues from), so a page never repeats or
skips a row that did not move, however deep the list. The format is ScanKey's."""

from __future__ import annotations

from pinledger.projections.store import JobRow, ScanKey


class PageTokenError(ValueError):
    """A token this dashboard did not hand out."""


def token_after(row: JobRow) -> str:
    """The token of the page that starts after `row`."""
    return ScanKey(row.job.run_after, row.partition, row.job.local_id).token()


def parse_token(token: str | None) -> ScanKey | None:
    """None (the first page) for an empty token, else where the previous page ended."""
    if not token:
        return None
    try:
        return ScanKey.from_token(token)
    except ValueError:
        raise PageTokenError(f"page token {token!r} is not one this dashboard made") from None


def page(rows: list[JobRow], size: int) -> tuple[list[JobRow], str | None]:
    """The rows of a page read with a LIMIT of `size + 1`, and the next page's token
    (None: this is the last page)."""
    shown = rows[:size]
    if len(rows) > size and shown:
        return shown, token_after(shown[-1])
    return shown, None
