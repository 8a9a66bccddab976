"""The cluster's ledger format (ledger/formats.py, decision 0025): what members
advertise, how the catalog's records fold to the format, who blocks a raise; and a
server's following of it (service/ownership/maintenance/ledger_format.py) on the in-memory log."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.cli import upgrade_format
from pinledger.ledger import codec, formats
from pinledger.ledger.events import Actor, Enqueued, Envelope, Event, FormatRaised, QueueCreated
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.ledger_format import (
    FORMAT_GAUGE,
    ClusterFormat,
    UnreadableFormatError,
)
from pinledger.service.testing.runtime import TEST_CONFIG
from tests.unit.strategies import events

PREFIX = "p."
ADMIN = Actor(source="admin")
format_sets = st.frozensets(st.integers(min_value=1, max_value=10_000), min_size=1)


@given(format_sets)
def test_an_advertisement_reads_back_as_the_formats_advertised(reads: frozenset[int]) -> None:
    text = formats.advertisement(reads)
    assert text.isascii() and text.isprintable()
    assert formats.advertised_reads(text) == reads


@pytest.mark.parametrize("text", ["", "pinledger@host:1", "formats=", "formats=x,y"])
def test_a_member_that_advertises_no_formats_is_held_to_read_format_1_only(text: str) -> None:
    assert formats.advertised_reads(text) == {formats.PLAIN}


def test_this_release_advertises_plain_group_and_guarded_records() -> None:
    assert formats.advertisement() == "formats=1,2,3"
    assert formats.LATEST == formats.GUARDED == 3


@given(st.integers(min_value=1, max_value=50), st.lists(events))
def test_the_format_is_the_highest_raise_and_other_events_change_nothing(
    start: int, found: list[Event]
) -> None:
    raised = [e.format for e in found if isinstance(e, FormatRaised)]
    assert formats.folded(start, found) == max([start, *raised])


def test_a_raise_is_never_undone_by_a_lower_one() -> None:
    assert formats.folded(1, [FormatRaised(2), FormatRaised(1)]) == 2


def test_a_format_this_release_does_not_read_is_refused_saying_what_to_do() -> None:
    assert formats.unreadable(1) is None and formats.unreadable(2) is None
    problem = formats.unreadable(4)
    assert problem is not None
    assert "ledger format is 4" in problem and "reads formats 1, 2, 3" in problem
    assert "upgrade this server" in problem


def test_blockers_name_each_member_that_would_not_read_the_target() -> None:
    members = {
        "pinledger@a:1": "formats=1,2",
        "pinledger@b:1": "",
        "pinledger@c:1": "formats=1",
    }
    assert formats.blockers(members, 2) == [
        "pinledger@b:1 advertises no formats (a release before 0.2.0): reads format 1 only",
        "pinledger@c:1 reads formats 1",
    ]
    assert formats.blockers(members, 1) == []
    assert formats.blockers({}, 2) == []


# -- a server following the catalog's format (FakeLog) --------------------------------


def _writer(log: FakeLog) -> LedgerWriter:
    return LedgerWriter(log, PREFIX)


def _catalog_record(log: FakeLog, *found: Event) -> None:
    value = codec.encode(Envelope(1, ADMIN, tuple(found)))
    log.append([Append(catalog_topic(PREFIX), 0, value)])


def test_a_new_catalog_starts_at_the_newest_format_and_the_writer_groups() -> None:
    log = FakeLog()
    writer = _writer(log)
    writer.ensure_catalog(1, ADMIN)
    writer.ensure_catalog(2, ADMIN)  # exists: no second record
    assert len(log.records(catalog_topic(PREFIX), 0)) == 1
    metrics = Metrics()
    following = ClusterFormat(log, PREFIX, writer, metrics)
    assert not writer.group.grouping  # plain records until told
    following.start()
    assert following.current == formats.LATEST
    assert writer.group.grouping
    assert metrics.snapshot_gauge(FORMAT_GAUGE) == formats.LATEST


def test_a_catalog_without_a_format_record_is_format_1_until_raised() -> None:
    """A cluster whose catalog an older release created: plain records only."""
    log = FakeLog()
    log.create_topic(catalog_topic(PREFIX), 1)
    _catalog_record(log, QueueCreated("q", 2))
    writer = _writer(log)
    following = ClusterFormat(log, PREFIX, writer)
    following.start()
    assert (following.current, writer.group.grouping) == (formats.PLAIN, False)
    writer.raise_format(formats.GROUPED, 2, ADMIN)
    following.refresh()
    assert (following.current, writer.group.grouping) == (formats.GROUPED, True)


def test_a_server_refuses_to_start_on_a_format_it_cannot_read() -> None:
    log = FakeLog()
    log.create_topic(catalog_topic(PREFIX), 1)
    _catalog_record(log, FormatRaised(4))
    # A record of format 4 this release cannot decode, after the raise.
    log.append([Append(catalog_topic(PREFIX), 0, b'{"v":2}')])
    with pytest.raises(UnreadableFormatError, match="ledger format is 4"):
        ClusterFormat(log, PREFIX, _writer(log)).start()


def test_a_raise_past_what_this_release_reads_stops_a_running_server() -> None:
    log = FakeLog()
    writer = _writer(log)
    writer.ensure_catalog(1, ADMIN)
    told: list[str] = []
    following = ClusterFormat(log, PREFIX, writer, on_unreadable=told.append)
    following.start()
    following.refresh()
    assert told == []
    writer.raise_format(4, 2, ADMIN)
    following.refresh()
    assert len(told) == 1 and "ledger format is 4" in told[0]


def test_the_writer_follows_the_format_both_ways() -> None:
    """follow_format decides the writer's records (format 1: never a group record)."""
    log = FakeLog()
    writer = _writer(log)
    writer.follow_format(formats.GROUPED)
    assert writer.group.grouping
    writer.follow_format(formats.PLAIN)
    assert not writer.group.grouping
    log.create_topic(writer.topic("q"), 1)
    job = Enqueued(body=b"x", priority=1, run_after=0, attempts_allowed=1)
    writer.enqueue("q", 0, [job], 1, ADMIN)
    [record] = log.records(writer.topic("q"), 0)
    assert not record.value.startswith(b"[")


# -- pinledger upgrade-format on the in-memory log ------------------------------------


def _upgrade(log: FakeLog, *args: str) -> int:
    parser = argparse.ArgumentParser()
    upgrade_format.add_arguments(parser)
    config = dataclasses.replace(TEST_CONFIG, topic_prefix=PREFIX)
    return upgrade_format.run(config, parser.parse_args(list(args)), log)


def test_upgrade_format_without_a_catalog_says_there_is_no_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _upgrade(FakeLog()) == upgrade_format.EXIT_NO_CLUSTER
    assert "no catalog topic p.catalog" in capsys.readouterr().out


def test_upgrade_format_raises_with_no_live_server_and_refuses_an_unknown_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = FakeLog()
    log.create_topic(catalog_topic(PREFIX), 1)  # a catalog of 0.1.0: format 1
    assert _upgrade(log, "--to", "4") == upgrade_format.EXIT_REFUSED
    assert "format 4 is unknown to this release" in capsys.readouterr().out
    assert _upgrade(log, "--check") == 0
    assert "would raise the ledger format from 1 to 3" in capsys.readouterr().out
    assert len(log.records(catalog_topic(PREFIX), 0)) == 0  # --check changed nothing
    assert _upgrade(log) == 0
    assert "raised the ledger format from 1 to 3" in capsys.readouterr().out
    following = ClusterFormat(log, PREFIX, _writer(log))
    following.start()
    assert following.current == 3
    assert _upgrade(log) == 0
    assert "already at format 3" in capsys.readouterr().out
