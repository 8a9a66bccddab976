"""Five-field cron expressions (minute hour day-of-month month day-of-week), as Vixie
cron reads them, and the instants they name in a time zone.

Each field is `*`, a number, a range `a-b`, any of them with a step `/n`, or a list of
those joined by commas; months and weekdays also take their English three-letter names
(`jan`, `mon`), and Sunday is 0 or 7. As in Vixie cron, when both the day of the month
and the day of the week are restricted (neither starts with `*`), a day matching either
one matches. `@yearly`, `@monthly`, `@weekly`, `@daily` (`@midnight`) and `@hourly`
stand for their usual expressions.

Times are wall-clock times in the schedule's zone. A wall time that a daylight-saving
change skips does not occur, so that day has no tick at it; a wall time that occurs
twice (the clock set back) ticks once, at its first occurrence.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (name, lowest, highest, names from `lowest` on)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# How far to look for the next tick: leap days repeat within 8 years, so an
# expression with no tick in that span never ticks (refused when parsed).
_HORIZON_DAYS = 8 * 366


class CronError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed expression: the values each field allows (day of week 0-6, Sunday 0)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # Whether the day of the month / of the week was restricted (did not start with *).
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_month or in_week
        return in_month and in_week

    def times_of_day(self) -> list[int]:
        """The minutes of a day (0-1439) the expression ticks at, in order."""
        return sorted(h * 60 + m for h in self.hours for m in self.minutes)


def parse_cron(text: str) -> Cron:
    """The expression, or CronError saying which field is wrong and why."""
    expanded = _MACROS.get(text.strip().lower(), text)
    fields = expanded.split()
    if len(fields) != 5:
        raise CronError(
            f"cron {text!r} has {len(fields)} fields; it needs five: minute hour "
            'day-of-month month day-of-week (like "30 2 * * 1-5")'
        )
    values = [
        _field(field, name, low, high, names)
        for field, (name, low, high, names) in zip(fields, _FIELDS, strict=True)
    ]
    weekdays = frozenset(d % 7 for d in values[4])
    cron = Cron(
        text=text,
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=weekdays,
        days_restricted=not fields[2].startswith("*"),
        weekdays_restricted=not fields[4].startswith("*"),
    )
    start = dt.date(2000, 1, 1)
    if not any(cron.day_matches(start + dt.timedelta(days=n)) for n in range(_HORIZON_DAYS)):
        raise CronError(f"cron {text!r} names no day that exists (like February 30)")
    return cron


def _field(text: str, name: str, low: int, high: int, names: Sequence[str]) -> frozenset[int]:
    found: set[int] = set()
    for part in text.lower().split(","):
        span, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise CronError(f"{name} {text!r}: the step after / must be a number >= 1")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _value(a, name, low, high, names), _value(b, name, low, high, names)
            if first > last:
                raise CronError(f"{name} {text!r}: the range {span} runs backwards")
        else:
            first = _value(span, name, low, high, names)
            last = high if step_text else first  # "5/15": from 5 to the end, every 15
        found.update(range(first, last + 1, step))
    return frozenset(found)


def _value(text: str, name: str, low: int, high: int, names: Sequence[str]) -> int:
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    if not text.isdigit():
        raise CronError(f"{name} {text!r} is not a number from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{name} {value} is out of range: {low} to {high}")
    return value


def next_tick(cron: Cron, zone: ZoneInfo, after_ms: int) -> int:
    """The first instant (epoch ms) after `after_ms` that the expression names in
    `zone`. parse_cron refused expressions that never tick, so there always is one."""
    local = dt.datetime.fromtimestamp(after_ms / 1000, zone)
    times = cron.times_of_day()
    day = local.date()
    # The day of `after_ms` from the minute after it; the days after it from midnight.
    start = bisect.bisect_right(times, local.hour * 60 + local.minute)
    for n in range(_HORIZON_DAYS + 1):
        if n:
            day += dt.timedelta(days=1)
            start = 0
        if not cron.day_matches(day):
            continue
        for minute in times[start:]:
            at = _instant(day, minute, zone)
            if at is not None and at > after_ms:
                return at
    raise AssertionError(f"cron {cron.text!r} has no tick after {after_ms}")  # parse refused


def _instant(day: dt.date, minute: int, zone: ZoneInfo) -> int | None:
    """Epoch ms of a wall time in the zone (its first occurrence), or None when the
    zone's clock skips it."""
    wall = dt.datetime(day.year, day.month, day.day, minute // 60, minute % 60, tzinfo=zone)
    utc = wall.astimezone(dt.UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != wall.replace(tzinfo=None):
        return None  # in a gap: the round trip lands on another wall time
    return int(utc.timestamp() * 1000)
