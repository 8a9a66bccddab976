"""Which tick of a schedule is due (service/schedules/due.py) and how a schedule is
written in the queue config (service/schedules/spec.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinledger.service.queue_config import QueueConfigError, parse_queue_config
from pinledger.service.schedules.due import MISSED_COUNT_CAP, Due, due, latest_tick
from pinledger.service.schedules.spec import MIN_KEY_WINDOW_MS, ScheduleSpec, parse_schedules

MINUTE = 60_000
T0 = 1_795_000_000_000 // MINUTE * MINUTE  # 2026-11-19, on a minute


def every(seconds: int) -> ScheduleSpec:
    return ScheduleSpec("s", b"body", every_s=seconds)


def cron(expr: str, zone: str = "UTC") -> ScheduleSpec:
    (spec,) = parse_schedules([{"name": "c", "cron": expr, "timezone": zone, "body": ""}], "q")
    return spec


def test_a_schedule_with_no_recorded_tick_begins_now_and_runs_nothing_from_before() -> None:
    assert due(every(60), None, T0 + 5) == Due(begins_ms=T0 + 5)
    assert every(60).next_after(T0 + 5) == T0 + MINUTE


def test_a_tick_is_due_once_its_time_has_come() -> None:
    spec = every(60)
    assert due(spec, T0, T0 + MINUTE - 1) == Due()
    assert due(spec, T0, T0 + MINUTE) == Due(tick_ms=T0 + MINUTE)
    assert due(spec, T0 + MINUTE, T0 + MINUTE + 10) == Due()


def test_missed_ticks_run_once_as_the_latest_and_are_counted() -> None:
    spec = every(60)
    assert due(spec, T0, T0 + 3 * MINUTE + 5) == Due(tick_ms=T0 + 3 * MINUTE, missed=2)
    daily = cron("0 3 * * *")
    day = 86_400_000
    last = daily.next_after(T0)
    assert due(daily, last, last + 4 * day + 1) == Due(tick_ms=last + 4 * day, missed=3)


def test_a_cron_in_a_zone_is_due_at_its_wall_time() -> None:
    spec = cron("0 9 * * *", "Europe/Paris")
    tick = spec.next_after(T0)
    assert (tick // 3_600_000) % 24 == 8  # 09:00 CET is 08:00 UTC in November


def test_a_ticks_key_names_it_and_stays_taken_two_periods_and_at_least_a_day() -> None:
    assert every(60).key(T0) == f"schedule:s:{T0}"
    assert every(60).key_window_ms(T0) == MIN_KEY_WINDOW_MS
    weekly_every = every(7 * 86_400)
    assert weekly_every.key_window_ms(weekly_every.next_after(T0)) == 14 * 86_400_000
    weekly = cron("0 0 * * 1")
    tick = weekly.next_after(T0)
    assert weekly.key_window_ms(tick) == 14 * 86_400_000


@settings(max_examples=300, deadline=None)
@given(
    seconds=st.integers(1, 7200),
    last_ticks=st.integers(0, 10_000),
    later_ms=st.integers(0, 5 * 3_600_000),
)
def test_the_due_tick_is_the_latest_after_the_last_and_the_rest_are_missed(
    seconds: int, last_ticks: int, later_ms: int
) -> None:
    spec = every(seconds)
    last = T0 // (seconds * 1000) * (seconds * 1000) + last_ticks * seconds * 1000
    now = last + later_ms
    ticks = []
    tick = spec.next_after(last)
    while tick <= now:
        ticks.append(tick)
        tick = spec.next_after(tick)
    found = due(spec, last, now)
    if not ticks:
        assert found == Due()
    else:
        assert found == Due(tick_ms=ticks[-1], missed=min(len(ticks) - 1, MISSED_COUNT_CAP))


@settings(max_examples=100, deadline=None)
@given(
    expr=st.sampled_from(["*/7 * * * *", "0 */5 * * *", "15 3 * * 1-5", "0 0 1 * *"]),
    hours=st.integers(0, 24 * 40),
)
def test_the_latest_cron_tick_is_found_without_walking_from_the_first(
    expr: str, hours: int
) -> None:
    spec = cron(expr)
    first = spec.next_after(T0)
    now = first + hours * 3_600_000
    expected = first
    while (after := spec.next_after(expected)) <= now:
        expected = after
    assert latest_tick(spec, first, now) == expected


def _config(schedule: dict[str, Any]) -> str:
    return json.dumps({"queues": [{"name": "q", "queueConfig": {"schedules": [schedule]}}]})


def test_the_queue_config_lists_a_queues_schedules() -> None:
    config = parse_queue_config(
        json.dumps(
            {
                "queues": [
                    {
                        "name": "reports",
                        "queueConfig": {
                            "schedules": [
                                {
                                    "name": "nightly",
                                    "cron": "0 3 * * *",
                                    "timezone": "Europe/Paris",
                                    "body": "report",
                                    "priority": 2,
                                    "attempts": 3,
                                },
                                {"name": "ping", "everySeconds": 30, "body": ""},
                            ]
                        },
                    }
                ]
            }
        )
    )
    nightly, ping = config.settings("reports").schedules
    assert (nightly.name, nightly.body, nightly.priority, nightly.attempts) == (
        "nightly",
        b"report",
        2,
        3,
    )
    assert nightly.when == "cron 0 3 * * * (Europe/Paris)"
    assert (ping.every_s, ping.priority, ping.attempts, ping.when) == (30, 1, 1, "every 30 s")
    assert config.settings("other").schedules == ()


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ({"name": "a", "body": ""}, "needs either cron or everySeconds"),
        ({"name": "a", "cron": "* * * * *", "everySeconds": 5, "body": ""}, "either cron or"),
        ({"name": "a", "everySeconds": 0, "body": ""}, "everySeconds must be an integer from 1"),
        ({"name": "a", "everySeconds": 1.5, "body": ""}, "everySeconds must be an integer"),
        ({"name": "a", "everySeconds": True, "body": ""}, "everySeconds must be an integer"),
        (
            {"name": "a", "everySeconds": 5, "timezone": "UTC", "body": ""},
            "timezone goes with cron",
        ),
        ({"name": "a", "cron": "0 3 * *", "body": ""}, "has 4 fields"),
        ({"name": "a", "cron": "0 3 * * *", "timezone": "Mars/Base", "body": ""}, "Mars/Base"),
        ({"name": "a b", "everySeconds": 5, "body": ""}, "name must be 1 to 64"),
        ({"name": "", "everySeconds": 5, "body": ""}, "name must be 1 to 64"),
        ({"name": "a", "everySeconds": 5}, "body must be a string"),
        ({"name": "a", "everySeconds": 5, "body": "", "priority": 0}, "priority must be"),
        ({"name": "a", "everySeconds": 5, "body": "", "attempts": True}, "attempts must be"),
        ({"name": "a", "everySeconds": 5, "body": "", "every": 5}, "unknown key 'every'"),
        ("nightly", "must be an object"),
    ],
)
def test_a_wrong_schedule_is_refused_naming_the_queue_and_the_schedule(
    schedule: Any, said: str
) -> None:
    with pytest.raises(QueueConfigError, match="q") as raised:
        parse_queue_config(_config(schedule))
    assert said in str(raised.value)


def test_a_schedule_listed_twice_is_refused() -> None:
    twice = {"name": "a", "everySeconds": 5, "body": ""}
    doc = {"queues": [{"name": "q", "queueConfig": {"schedules": [twice, twice]}}]}
    with pytest.raises(QueueConfigError, match="schedule 'a' is listed twice"):
        parse_queue_config(json.dumps(doc))
