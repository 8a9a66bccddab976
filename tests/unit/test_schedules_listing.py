"""What `pinledger schedules` and the dashboard list (service/schedules/listing.py):
each schedule of the config with its last tick and its next, the ones the config no
longer lists, and those of a queue that does not exist."""

from __future__ import annotations

import json

from pinledger.cli import schedules as schedules_cli
from pinledger.projections.store import ScheduleTick
from pinledger.service.queue_config import parse_queue_config
from pinledger.service.schedules.listing import ScheduleLine, schedule_lines

MINUTE = 60_000
NOW = 1_795_000_000_000 // MINUTE * MINUTE + 5_000


def _config() -> str:
    return json.dumps(
        {
            "queues": [
                {
                    "name": "mail",
                    "queueConfig": {
                        "schedules": [
                            {"name": "ping", "everySeconds": 60, "body": ""},
                            {"name": "fresh", "everySeconds": 60, "body": ""},
                        ]
                    },
                },
                {
                    "name": "ghost",
                    "queueConfig": {"schedules": [{"name": "x", "everySeconds": 5, "body": ""}]},
                },
            ]
        }
    )


def test_each_schedule_with_its_last_and_next_tick() -> None:
    config = parse_queue_config(_config())
    last = NOW - 5_000
    ticks = [
        ScheduleTick("mail", "ping", last, "mail:s0:p1:7", last + 3),
        ScheduleTick("mail", "fresh", NOW - 1_000, "", NOW - 1_000),  # began, not run
        ScheduleTick("mail", "gone", last - MINUTE, "mail:s0:p1:3", last),
    ]
    lines = {(line.queue, line.name): line for line in schedule_lines(config, ticks, ["mail"], NOW)}
    assert lines[("mail", "ping")] == ScheduleLine(
        "mail", "ping", "every 60 s", last, "mail:s0:p1:7", last + MINUTE, True
    )
    fresh = lines[("mail", "fresh")]
    assert (fresh.last_ms, fresh.last_job, fresh.next_ms) == (None, "", NOW - 5_000 + MINUTE)
    gone = lines[("mail", "gone")]
    assert (gone.when, gone.next_ms, gone.last_job) == ("", None, "mail:s0:p1:3")
    ghost = lines[("ghost", "x")]
    assert not ghost.queue_exists and ghost.last_ms is None
    assert list(lines) == sorted(lines)


def test_the_command_says_each_schedule_on_a_line_of_its_own() -> None:
    config = parse_queue_config(_config())
    lines = schedule_lines(config, [], ["mail"], NOW)
    text = [schedules_cli._text(line) for line in lines]
    assert text[0] == "ghost/x: every 5 s; the queue does not exist: create it"
    assert text[1].startswith("mail/fresh: every 60 s; last tick never; next ")
    as_json = schedules_cli._json(lines[2])
    assert as_json["schedule"] == "ping" and as_json["queue_exists"] is True
