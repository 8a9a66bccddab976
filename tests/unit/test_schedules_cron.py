"""Cron expressions (service/schedules/cron.py): the ticks they name, checked against a
minute-by-minute scan, and the daylight-saving days of a zone."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.service.schedules.cron import Cron, CronError, next_tick, parse_cron

UTC = ZoneInfo("UTC")
PARIS = ZoneInfo("Europe/Paris")


def ms(text: str, zone: ZoneInfo = UTC) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=zone).timestamp() * 1000)


def iso(at_ms: int, zone: ZoneInfo = UTC) -> str:
    return dt.datetime.fromtimestamp(at_ms / 1000, zone).strftime("%Y-%m-%d %H:%M %Z")


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/15 * * * *", "2026-11-28 10:07:30", "2026-11-28 10:15 UTC"),
        ("*/15 * * * *", "2026-11-28 10:15:00", "2026-11-28 10:30 UTC"),
        ("0 3 * * *", "2026-11-28 03:00:00.001", "2026-11-29 03:00 UTC"),
        ("5/20 * * * *", "2026-11-28 10:46:00", "2026-11-28 11:05 UTC"),
        ("0 9 * jan-mar mon-fri", "2026-11-28 00:00:00", "2027-01-01 09:00 UTC"),
        ("0 0 * * 7", "2026-11-28 00:00:00", "2026-11-29 00:00 UTC"),  # 7 is Sunday
        ("0 0 * * sun", "2026-11-28 00:00:00", "2026-11-29 00:00 UTC"),
        # Day of month and day of week both restricted: either matches (Vixie cron).
        ("0 0 13 * 5", "2026-11-28 00:00:00", "2026-12-04 00:00 UTC"),
        ("0 0 13 * 5", "2026-12-11 00:00:00", "2026-12-13 00:00 UTC"),
        ("0 0 29 2 *", "2026-11-28 00:00:00", "2028-02-29 00:00 UTC"),
        ("@hourly", "2026-11-28 10:07:00", "2026-11-28 11:00 UTC"),
        ("@weekly", "2026-11-28 10:07:00", "2026-11-29 00:00 UTC"),
        ("@yearly", "2026-11-28 10:07:00", "2027-01-01 00:00 UTC"),
        ("0,30 8-9 * * *", "2026-11-28 08:30:00", "2026-11-28 09:00 UTC"),
    ],
)
def test_the_next_tick_of_an_expression(expr: str, after: str, expected: str) -> None:
    assert iso(next_tick(parse_cron(expr), UTC, ms(after))) == expected


def test_a_wall_time_the_clock_skips_has_no_tick_that_day() -> None:
    # Paris, 2026-03-29: 02:00 becomes 03:00, so 02:30 does not occur.
    cron = parse_cron("30 2 * * *")
    tick = next_tick(cron, PARIS, ms("2026-03-28 02:30:00", PARIS))
    assert iso(tick, PARIS) == "2026-03-30 02:30 CEST"


def test_a_wall_time_that_occurs_twice_ticks_once_at_its_first_occurrence() -> None:
    # Paris, 2026-10-25: 03:00 becomes 02:00 again, so 02:30 occurs twice.
    cron = parse_cron("30 2 * * *")
    first = next_tick(cron, PARIS, ms("2026-10-25 00:00:00", PARIS))
    assert iso(first, UTC) == "2026-10-25 00:30 UTC"  # 02:30 CEST
    assert iso(next_tick(cron, PARIS, first), UTC) == "2026-10-26 01:30 UTC"  # 02:30 CET


def test_a_zone_moves_the_tick() -> None:
    cron = parse_cron("0 9 * * *")
    assert iso(next_tick(cron, PARIS, ms("2026-11-28 00:00:00")), UTC) == "2026-11-28 08:00 UTC"


@pytest.mark.parametrize(
    ("expr", "said"),
    [
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "minute 60 is out of range: 0 to 59"),
        ("* 24 * * *", "hour 24 is out of range"),
        ("* * 0 * *", "day of month 0 is out of range: 1 to 31"),
        ("* * * 13 *", "month 13 is out of range"),
        ("* * * * 8", "day of week 8 is out of range: 0 to 7"),
        ("5-1 * * * *", "runs backwards"),
        ("*/0 * * * *", "step after / must be a number >= 1"),
        ("x * * * *", "minute 'x' is not a number"),
        ("0 0 30 2 *", "names no day that exists"),
        ("0 0 31 4,6,9,11 *", "names no day that exists"),
        ("@often", "has 1 fields"),
    ],
)
def test_a_wrong_expression_is_refused_saying_why(expr: str, said: str) -> None:
    with pytest.raises(CronError, match=said.replace("*", r"\*").replace("/", "/")):
        parse_cron(expr)


def _part(low: int, high: int) -> st.SearchStrategy[str]:
    single = st.integers(low, high).map(str)
    ranged = st.tuples(st.integers(low, high), st.integers(low, high)).map(
        lambda ab: f"{min(ab)}-{max(ab)}"
    )
    stepped = st.tuples(st.sampled_from(["*", f"{low}-{high}"]), st.integers(1, 9)).map(
        lambda p: f"{p[0]}/{p[1]}"
    )
    one = st.one_of(st.just("*"), single, ranged, stepped)
    return st.lists(one, min_size=1, max_size=3).map(",".join)


_EXPRESSIONS = st.tuples(_part(0, 59), _part(0, 23), _part(1, 31), _part(1, 12), _part(0, 7)).map(
    " ".join
)


def _scan(cron: Cron, after_ms: int, minutes: int) -> int | None:
    """The first minute after `after_ms` (UTC) the expression matches, minute by minute."""
    start = dt.datetime.fromtimestamp(after_ms / 1000, UTC).replace(second=0, microsecond=0)
    for n in range(1, minutes + 1):
        at = start + dt.timedelta(minutes=n)
        if at.minute in cron.minutes and at.hour in cron.hours and cron.day_matches(at.date()):
            return int(at.timestamp() * 1000)
    return None


@settings(max_examples=150, deadline=None)
@given(expr=_EXPRESSIONS, after=st.integers(ms("2024-01-01 00:00:00"), ms("2030-01-01 00:00:00")))
def test_the_next_tick_is_the_first_matching_minute(expr: str, after: int) -> None:
    try:
        cron = parse_cron(expr)
    except CronError:
        return  # a combination naming no day (like 31 in a 30-day month)
    tick = next_tick(cron, UTC, after)
    assert tick > after
    horizon = 3 * 24 * 60
    scanned = _scan(cron, after, horizon)
    if scanned is not None:
        assert tick == scanned
    else:
        assert tick > after + horizon * 60_000 - 60_000
