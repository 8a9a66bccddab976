"""`pinledger replay`'s progress line says what its two numbers count: job events
replayed, and the log's records (a record holds one event or a thousand), not "N of
~M events" with M a count of records."""

from __future__ import annotations

import pytest

from pinledger.cli.replay import progress_printer


def test_the_progress_line_counts_events_against_the_logs_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress_printer()(240_000, 240)
    line = capsys.readouterr().out
    assert "replayed 240,000 events" in line
    assert "of a log of ~240 records" in line
