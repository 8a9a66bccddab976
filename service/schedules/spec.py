"""A queue's periodic jobs as its queue config states them (`"schedules"`, decision
0038), and when each ticks.

    "schedules": [{"name": "nightly-report", "cron": "0 3 * * *",
                   "timezone": "Europe/Paris", "body": "report", "priority": 2,
                   "attempts": 3},
                  {"name": "heartbeat", "everySeconds": 30, "body": "ping"}]

name          letters, digits, '_', '-' and '.', at most 64; unique within the queue.
cron          five fields (service/schedules/cron.py), with an optional "timezone" (an
              IANA name, default UTC); or
everySeconds  an integer >= 1: ticks at the multiples of it since the epoch (UTC), so
              every server computes the same ticks.
body          the job's body (a string, UTF-8).
priority      optional, the job's priority (default 1).
attempts      optional, the job's attempts (default 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pinledger.service.schedules.cron import Cron, CronError, next_tick, parse_cron

NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_KEYS = {"name", "cron", "timezone", "everySeconds", "body", "priority", "attempts"}
# The longest interval: a century, so that ticks stay bigints of milliseconds.
_MAX_EVERY_S = 100 * 365 * 86_400
# How long a tick's key stays taken after its job finished, at least (decision 0038):
# long enough for any failover to find it.
MIN_KEY_WINDOW_MS = 86_400_000


class ScheduleError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    name: str
    body: bytes
    priority: int = 1
    attempts: int = 1
    cron: Cron | None = None
    timezone: str = "UTC"
    every_s: int | None = None

    @property
    def timing(self) -> tuple[object, ...]:
        """What decides its ticks (not its job's body, priority or attempts)."""
        return (None if self.cron is None else self.cron.text, self.timezone, self.every_s)

    @property
    def when(self) -> str:
        """How the schedule is written, for listings: the cron with its zone, or the
        interval."""
        if self.cron is not None:
            return f"cron {self.cron.text} ({self.timezone})"
        return f"every {self.every_s} s"

    def next_after(self, after_ms: int) -> int:
        """The schedule's first tick after `after_ms` (epoch ms)."""
        if self.cron is not None:
            return next_tick(self.cron, ZoneInfo(self.timezone), after_ms)
        assert self.every_s is not None
        every_ms = self.every_s * 1000
        return (after_ms // every_ms + 1) * every_ms

    def key(self, tick_ms: int) -> str:
        """The unique key of a tick's job: one job per tick however often it is asked."""
        return f"schedule:{self.name}:{tick_ms}"

    def key_window_ms(self, tick_ms: int) -> int:
        """How long a tick's key stays taken after its job finished: two periods of the
        schedule, and at least a day."""
        period = self.next_after(tick_ms) - tick_ms
        return max(MIN_KEY_WINDOW_MS, 2 * period)


def parse_schedules(value: Any, where: str) -> tuple[ScheduleSpec, ...]:
    """The `"schedules"` of a queue's config, or ScheduleError naming what is wrong."""
    if not isinstance(value, list):
        raise ScheduleError(f"{where}: schedules must be a list of objects, got {value!r}")
    specs: list[ScheduleSpec] = []
    for i, item in enumerate(value):
        spec = _spec(item, f"{where}: schedules[{i}]")
        if any(s.name == spec.name for s in specs):
            raise ScheduleError(f"{where}: schedule {spec.name!r} is listed twice")
        specs.append(spec)
    return tuple(specs)


def _spec(item: Any, where: str) -> ScheduleSpec:
    if not isinstance(item, dict):
        raise ScheduleError(
            f"{where} must be an object with a name, a body and a cron or "
            f"everySeconds, got {item!r}"
        )
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        raise ScheduleError(
            f"{where}: unknown key {unknown[0]!r} (expected one of {', '.join(sorted(_KEYS))})"
        )
    name = item.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ScheduleError(
            f"{where}.name must be 1 to 64 letters, digits, '_', '-' or '.', got {name!r}"
        )
    where = f"{where} ({name!r})"
    body = item.get("body")
    if not isinstance(body, str):
        raise ScheduleError(f"{where}: body must be a string, got {body!r}")
    priority = item.get("priority", 1)
    attempts = item.get("attempts", 1)
    for key, number in (("priority", priority), ("attempts", attempts)):
        if not (isinstance(number, int) and not isinstance(number, bool) and number >= 1):
            raise ScheduleError(f"{where}: {key} must be an integer >= 1, got {number!r}")
    cron, zone, every_s = _timing(item, where)
    return ScheduleSpec(
        name, body.encode(), priority, attempts, cron=cron, timezone=zone, every_s=every_s
    )


def _timing(item: dict[str, Any], where: str) -> tuple[Cron | None, str, int | None]:
    """The schedule's cron and time zone, or its interval."""
    cron_text, every = item.get("cron"), item.get("everySeconds")
    if (cron_text is None) == (every is None):
        raise ScheduleError(f"{where} needs either cron or everySeconds (one of them)")
    zone = item.get("timezone", "UTC")
    if every is not None:
        if "timezone" in item:
            raise ScheduleError(f"{where}: timezone goes with cron, not everySeconds")
        if not (
            isinstance(every, int) and not isinstance(every, bool) and 1 <= every <= _MAX_EVERY_S
        ):
            raise ScheduleError(
                f"{where}: everySeconds must be an integer from 1 to {_MAX_EVERY_S}, got {every!r}"
            )
        return None, "UTC", every
    if not isinstance(cron_text, str):
        raise ScheduleError(f"{where}: cron must be a string, got {cron_text!r}")
    try:
        cron = parse_cron(cron_text)
    except CronError as exc:
        raise ScheduleError(f"{where}: {exc}") from None
    if not isinstance(zone, str) or not _zone_exists(zone):
        raise ScheduleError(
            f"{where}: timezone {zone!r} is not a time zone this machine knows (an IANA "
            'name like "Europe/Paris"; Debian: the tzdata package)'
        )
    return cron, zone, None


def _zone_exists(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
