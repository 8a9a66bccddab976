"""ledger/times.py: the one way times are shown and read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.times import format_ms, parse_ms

# 1970 .. 9999: what datetime can show.
MS = st.integers(min_value=0, max_value=253_402_300_799_999)


def test_format() -> None:
    assert format_ms(1_795_400_100_123) == "2026-11-23 02:15:00.123"
    assert format_ms(1_795_400_100_123, zulu=True) == "2026-11-23 02:15:00.123Z"
    assert format_ms(None) == "-"


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1795400100123", 1_795_400_100_123),
        ("2026-11-23T02:15:00", 1_795_400_100_000),
        ("2026-11-23 02:15:00.123", 1_795_400_100_123),
        ("2026-11-23T03:15:00+01:00", 1_795_400_100_000),
    ],
)
def test_parse(text: str, ms: int) -> None:
    assert parse_ms(text) == ms


def test_parse_refuses_with_what_it_expected() -> None:
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_ms("yesterday")


@given(MS)
def test_what_is_shown_reads_back(ms: int) -> None:
    assert parse_ms(format_ms(ms)) == ms
    assert parse_ms(format_ms(ms, zulu=True)) == ms
