"""The MySQL store's plan of job_events' partitions (projections/mysql/day_partitions.py): day
partitions between gaps, so each day partition holds exactly its day although MariaDB's
RANGE partitions have upper bounds only."""

from __future__ import annotations

import itertools

import pytest

from pinledger.projections.day_partitions import DAY_MS, DayPartition, day_start
from pinledger.projections.dsn import is_mysql
from pinledger.projections.mysql.day_partitions import Part, Split, gap, plan_creation, plan_drop
from pinledger.projections.store import StoreError
from pinledger.service.config import Config

DAY0 = day_start(1_700_000_000_000)
FRESH = [Part("job_events_g19700101", 0)]


def _day(n: int) -> DayPartition:
    return DayPartition(DAY0 + n * DAY_MS, DAY0 + (n + 1) * DAY_MS)


def _apply(parts: list[Part], splits: list[Split], added: list[Part]) -> list[Part]:
    """What MariaDB holds after the planned DDL."""
    current = list(parts)
    for split in splits:
        i = [p.name for p in current].index(split.partition)
        current[i : i + 1] = split.into
    return current + added


def _covers_exactly(parts: list[Part]) -> None:
    """Every day partition's predecessor ends where its day starts; bounds increase."""
    bounds = [p.bound for p in parts]
    assert bounds == sorted(set(bounds))
    assert not parts[0].is_day
    for before, part in itertools.pairwise(parts):
        if part.is_day:
            assert before.bound == part.day.start


def test_a_fresh_table_gets_a_gap_then_the_days_added_above_it() -> None:
    splits, added = plan_creation(FRESH, [_day(0), _day(1), _day(2)])
    assert splits == []
    assert [p.name for p in added] == [
        "job_events_g20231114",
        "job_events_p20231114",
        "job_events_p20231115",
        "job_events_p20231116",
    ]
    _covers_exactly(FRESH + added)


def test_a_day_below_the_last_bound_splits_the_gap_that_holds_it() -> None:
    parts = [*FRESH, gap(DAY0 + 2 * DAY_MS), Part(_day(2).name, _day(2).end)]
    splits, added = plan_creation(parts, [_day(0)])
    assert added == []
    assert splits == [
        Split("job_events_g20231116", [gap(DAY0), Part(_day(0).name, _day(0).end), parts[1]])
    ]
    after = _apply(parts, splits, added)
    _covers_exactly(after)
    assert [p.day for p in after if p.is_day] == [_day(0), _day(2)]


def test_a_day_right_after_a_day_needs_no_gap_below_it() -> None:
    parts = [*FRESH, gap(DAY0), Part(_day(0).name, _day(0).end), gap(DAY0 + 3 * DAY_MS)]
    splits, added = plan_creation(parts, [_day(1), _day(2)])
    after = _apply(parts, splits, added)
    _covers_exactly(after)
    assert [p.day for p in after if p.is_day] == [_day(0), _day(1), _day(2)]
    assert plan_creation(after, [_day(1)]) == ([], [])


def test_a_day_below_the_first_gap_keeps_a_gap_first() -> None:
    parts = [gap(DAY0 + 3 * DAY_MS)]
    after = _apply(parts, *plan_creation(parts, [_day(1)]))
    _covers_exactly(after)
    assert after[0] == gap(DAY0 + DAY_MS)


def test_partitions_not_made_by_the_store_are_refused() -> None:
    odd = [*FRESH, Part(_day(1).name, _day(1).end + DAY_MS)]
    with pytest.raises(StoreError, match="overlaps"):
        plan_creation(odd, [_day(1)])


def test_a_drop_keeps_the_newest_old_partition_emptied_as_the_first_gap() -> None:
    parts = _apply(FRESH, *plan_creation(FRESH, [_day(0), _day(1), _day(2)]))
    dropped, kept = plan_drop(parts, DAY0 + 2 * DAY_MS + 1)
    assert [p.name for p in dropped] == [
        "job_events_g19700101",
        "job_events_g20231114",
        "job_events_p20231114",
    ]
    assert kept == Part(_day(1).name, _day(1).end)
    # Only gaps old enough: nothing to do.
    assert plan_drop(parts, DAY0 + DAY_MS - 1) == ([], None)


def test_the_store_dsn_picks_the_adapter_and_the_old_name_still_works() -> None:
    assert is_mysql("mysql://u:p@h:3306/db")
    assert not is_mysql("postgresql://u:p@h/db") and not is_mysql("host=h dbname=db")
    old = Config.from_env({"PINLEDGER_PG_DSN": "postgresql://a/b"})
    assert old.store_url == "postgresql://a/b"
    both = Config.from_env(
        {"PINLEDGER_PG_DSN": "postgresql://a/b", "PINLEDGER_STORE_DSN": "mysql://u:p@h:1/d"}
    )
    assert both.store_url == "mysql://u:p@h:1/d"
