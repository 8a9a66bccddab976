"""Each schedule with its last and next tick: what `pinledger schedules` and the
dashboard's queue page show, from the queue config and the catalog's recorded ticks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pinledger.projections.store import ScheduleTick
from pinledger.service.queue_config import QueueConfig


@dataclass(frozen=True, slots=True)
class ScheduleLine:
    queue: str
    name: str
    # How it is written ("cron 0 3 * * * (UTC)", "every 30 s"); "" when the queue
    # config no longer lists it (its last tick is still recorded).
    when: str
    # The last tick enqueued (epoch ms) and its job; None before the first.
    last_ms: int | None
    last_job: str
    # When the next tick is due; None for a schedule the config no longer lists.
    next_ms: int | None
    # Whether the catalog lists the queue (a schedule of a missing queue never runs).
    queue_exists: bool


def schedule_lines(
    config: QueueConfig, ticks: Iterable[ScheduleTick], queues: Iterable[str], now_ms: int
) -> list[ScheduleLine]:
    """Every schedule the config lists, and every one with a recorded tick, by queue and
    name. A schedule's next tick is the first after its last recorded one (earlier than
    now when it is overdue), or, before the schedule has begun, the first after now."""
    recorded = {(t.queue, t.schedule): t for t in ticks}
    existing = set(queues)
    lines = []
    for queue, settings in config.queues.items():
        for spec in settings.schedules:
            tick = recorded.pop((queue, spec.name), None)
            ran = tick is not None and tick.job != ""
            lines.append(
                ScheduleLine(
                    queue,
                    spec.name,
                    spec.when,
                    tick.tick_ms if tick is not None and ran else None,
                    tick.job if tick is not None else "",
                    spec.next_after(now_ms if tick is None else tick.tick_ms),
                    queue in existing,
                )
            )
    for (queue, name), tick in recorded.items():
        last = tick.tick_ms if tick.job else None
        lines.append(ScheduleLine(queue, name, "", last, tick.job, None, queue in existing))
    return sorted(lines, key=lambda line: (line.queue, line.name))
