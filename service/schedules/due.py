"""Which tick of a schedule to enqueue now, given the last tick the catalog recorded:
the one policy for ticks that were missed.

A missed tick is not run on its own: when several ticks are due at once (the duty's
holder was down, or every server was), the latest is enqueued, once, and the earlier
ones are counted as missed (logged and in `pinledger_schedule_ticks_missed_total`).
A schedule the catalog has no tick of begins where the duty first sees it: its first
tick is the first after that moment, never one from before the schedule existed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinledger.service.schedules.spec import ScheduleSpec

# Missed ticks are counted up to this (a per-minute cron down for months).
MISSED_COUNT_CAP = 10_000


@dataclass(frozen=True, slots=True)
class Due:
    # The tick to enqueue now, if any.
    tick_ms: int | None = None
    # Ticks before it that will never run (at most MISSED_COUNT_CAP).
    missed: int = 0
    # Where the schedule begins, when the catalog has no tick of it: record it.
    begins_ms: int | None = None


def due(spec: ScheduleSpec, last_ms: int | None, now_ms: int) -> Due:
    """What to do for `spec` at `now_ms`, its last recorded tick being `last_ms`."""
    if last_ms is None:
        return Due(begins_ms=now_ms)
    first = spec.next_after(last_ms)
    if first > now_ms:
        return Due()
    latest = latest_tick(spec, first, now_ms)
    return Due(tick_ms=latest, missed=_count_between(spec, first, latest))


def latest_tick(spec: ScheduleSpec, first: int, now_ms: int) -> int:
    """The schedule's last tick at or before `now_ms`, `first` being a tick at or before
    it. A window that doubles from a minute back finds a tick near `now_ms` without
    walking every tick since `first`."""
    if spec.every_s is not None:
        every_ms = spec.every_s * 1000
        return max(first, now_ms // every_ms * every_ms)
    window = 60_000
    while True:
        tick = spec.next_after(max(now_ms - window, first - 1))
        if tick <= now_ms:
            break
        window *= 2
    while (after := spec.next_after(tick)) <= now_ms:
        tick = after
    return tick


def _count_between(spec: ScheduleSpec, first: int, latest: int) -> int:
    """The ticks from `first` up to, not including, `latest`."""
    if spec.every_s is not None:
        return min(MISSED_COUNT_CAP, (latest - first) // (spec.every_s * 1000))
    count, tick = 0, first
    while tick < latest and count < MISSED_COUNT_CAP:
        count += 1
        tick = spec.next_after(tick)
    return count
