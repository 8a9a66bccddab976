"""The projection lag an owner exports (service/ownership/lag.py) and the partitions no
server owns (watchdog.py): in records and seconds per owned partition and queue, gone
with the partition; and, on the fakes, what a real owner exports for what it owns."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Enqueued, Envelope
from pinledger.ledger.log import Append, GroupMember, catalog_topic, queue_topic
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.lag import MAX_READS, ProjectionLag
from pinledger.service.ownership.maintenance.watchdog import unowned_partitions
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

A0, A1, B0 = ("p.q.a", 0), ("p.q.a", 1), ("p.q.b", 0)
RECORDS = "pinledger_projection_lag_records"
SECONDS = "pinledger_projection_lag_seconds"


def _gauges(metrics: Metrics, name: str) -> dict[str, float]:
    """The series of gauge `name` as /metrics shows them: labels text -> value."""
    found = {}
    for line in metrics.prometheus().splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) :].rsplit(" ", 1)
            found[labels] = float(value)
    return found


def test_a_caught_up_partition_lags_nothing() -> None:
    metrics = Metrics()
    ProjectionLag(metrics, "p.").update({A0: 7}, {A0: 7}, now=5.0)
    assert _gauges(metrics, RECORDS) == {'{partition="0",topic="p.q.a"}': 0}
    assert _gauges(metrics, SECONDS) == {'{queue="a"}': 0}


def test_the_age_is_counted_from_the_first_read_that_saw_the_oldest_unprojected_record() -> None:
    metrics = Metrics()
    lag = ProjectionLag(metrics, "p.")
    lag.update({A0: 10}, {A0: 15}, now=100.0)  # records 10..14 seen now
    assert metrics.snapshot_gauge(RECORDS, topic="p.q.a", partition="0") == 5
    assert metrics.snapshot_gauge(SECONDS, queue="a") == 0  # at least 0 s old
    lag.update({A0: 12}, {A0: 20}, now=102.0)  # record 12 was there at 100
    assert metrics.snapshot_gauge(RECORDS, topic="p.q.a", partition="0") == 8
    assert metrics.snapshot_gauge(SECONDS, queue="a") == 2
    lag.update({A0: 16}, {A0: 20}, now=104.0)  # record 16: first seen at 102
    assert metrics.snapshot_gauge(SECONDS, queue="a") == 2
    lag.update({A0: 20}, {A0: 20}, now=106.0)
    assert metrics.snapshot_gauge(RECORDS, topic="p.q.a", partition="0") == 0
    assert metrics.snapshot_gauge(SECONDS, queue="a") == 0
    lag.update({A0: 20}, {A0: 21}, now=108.0)  # behind again: a new record, a new clock
    assert metrics.snapshot_gauge(SECONDS, queue="a") == 0


def test_a_queue_lags_as_its_worst_partition_and_partitions_no_longer_owned_lose_their_series() -> (
    None
):
    metrics = Metrics()
    lag = ProjectionLag(metrics, "p.")
    lag.update({A0: 0, A1: 0, B0: 0}, {A0: 1, A1: 0, B0: 0}, now=10.0)
    lag.update({A0: 0, A1: 0, B0: 0}, {A0: 1, A1: 3, B0: 0}, now=13.0)
    assert _gauges(metrics, SECONDS) == {'{queue="a"}': 3, '{queue="b"}': 0}
    # A1 went to another server, b's topic is gone (no end offset): no series of them.
    lag.update({A0: 1, B0: 0}, {A0: 1}, now=14.0)
    assert _gauges(metrics, RECORDS) == {'{partition="0",topic="p.q.a"}': 0}
    assert _gauges(metrics, SECONDS) == {'{queue="a"}': 0}
    lag.update({}, {}, now=15.0)
    assert _gauges(metrics, RECORDS) == {} and _gauges(metrics, SECONDS) == {}


def test_the_catalog_topic_counts_in_records_and_is_no_queue() -> None:
    metrics = Metrics()
    ProjectionLag(metrics, "p.").update({("p.catalog", 0): 2}, {("p.catalog", 0): 5}, 1.0)
    assert _gauges(metrics, RECORDS) == {'{partition="0",topic="p.catalog"}': 3}
    assert _gauges(metrics, SECONDS) == {}


# A log's life: each step, records appended (each at the step's time), the projection
# moving on by some, then a read of the end.
steps = st.lists(st.tuples(st.floats(0.1, 5), st.integers(0, 50), st.integers(0, 60)), max_size=80)


@given(steps)
def test_the_age_is_a_lower_bound_within_one_read_of_the_truth(
    life: list[tuple[float, int, int]],
) -> None:
    """Against the true age of the oldest unprojected record: never more, and (while
    no read was thinned out) less by at most the time between two reads (the record
    was appended after the read before the one that first saw it)."""
    metrics = Metrics()
    lag = ProjectionLag(metrics, "p.")
    appended_at: list[float] = []
    now, projected, longest_gap = 0.0, 0, 0.0
    for reads, (step, appended, progress) in enumerate(life, start=1):
        now += step
        longest_gap = max(longest_gap, step)
        appended_at += [now - step / 2] * appended  # appended between two reads
        projected = min(len(appended_at), projected + progress)
        lag.update({A0: projected}, {A0: len(appended_at)}, now)
        measured = metrics.snapshot_gauge(SECONDS, queue="a")
        assert measured is not None
        truth = now - appended_at[projected] if projected < len(appended_at) else 0.0
        assert measured <= truth + 1e-9
        if reads <= MAX_READS:
            assert measured >= truth - longest_gap - 1e-9


def test_the_reads_kept_are_bounded() -> None:
    metrics = Metrics()
    lag = ProjectionLag(metrics, "p.")
    for i in range(1000):  # the projection stuck at 0, the log growing
        lag.update({A0: 0}, {A0: i + 1}, now=float(i))
    assert len(lag._reads[A0]) <= MAX_READS + 1
    assert metrics.snapshot_gauge(SECONDS, queue="a") == 999  # the first read is kept


def _members(*owned: list[tuple[str, int]]) -> list[GroupMember]:
    return [GroupMember(f"m{i}", list(parts)) for i, parts in enumerate(owned)]


def test_unowned_partitions_are_the_catalogs_and_its_queues_no_member_is_assigned() -> None:
    counts = {"p.q.a": 2, "p.q.b": 3}
    everything = [("p.catalog", 0), A0, A1, B0, ("p.q.b", 1), ("p.q.b", 2)]
    assert unowned_partitions(counts, _members(everything[:3], everything[3:]), "p.catalog") == 0
    assert unowned_partitions(counts, _members(everything[1:4]), "p.catalog") == 3
    assert unowned_partitions(counts, [], "p.catalog") == 6  # a group with no members
    assert unowned_partitions({}, [], "p.catalog") == 1


# -- a real owner on the fakes --------------------------------------------------------

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=2)
PREFIX = CONFIG.topic_prefix


def _owner_series(node: Node) -> Mapping[str, float]:
    return _gauges(node.metrics, RECORDS)


def _members_tick(rt: Runtime, node: Node, holds: str) -> None:
    """Move the clock until the members thread's next tick has exported what `holds`
    says (a members tick runs every 2 s of clock time)."""
    rt.advance_until(lambda: holds in node.metrics.prometheus(), holds, step_s=0.5)


def test_an_owner_exports_the_lag_of_what_it_owns_and_only_that() -> None:
    with Runtime(CONFIG) as rt:
        a = rt.node()
        a.create_queue("mail")
        a.enqueue("mail", job(b"x"), job(b"y"))
        rt.settle()
        topic = queue_topic(PREFIX, "mail")
        _members_tick(rt, a, "pinledger_unowned_partitions 0")
        rt.advance_until(lambda: len(_owner_series(a)) == 3, "the lag of three partitions")
        assert _owner_series(a) == {
            f'{{partition="0",topic="{catalog_topic(PREFIX)}"}}': 0,
            f'{{partition="0",topic="{topic}"}}': 0,
            f'{{partition="1",topic="{topic}"}}': 0,
        }
        assert a.metrics.snapshot_gauge(SECONDS, queue="mail") == 0

        b = rt.node()  # takes a share: each exports the lag of what it owns now
        rt.settle()

        def follows_its_share(node: Node) -> bool:
            mine = {f'{{partition="{p}",topic="{topic}"}}' for _, p in node.serving()}
            exported = {k for k in _owner_series(node) if topic in k}
            return len(mine) == 1 and exported == mine

        rt.advance_until(lambda: follows_its_share(a) and follows_its_share(b), "each its share")


def test_a_paused_partition_lags_from_the_record_it_is_paused_at() -> None:
    """A record no release decodes pauses its partition (decision 0032): the records
    behind it pile up, and the lag says how many and since when."""
    with Runtime(CONFIG) as rt:
        a = rt.node()
        a.create_queue("mail")
        rt.settle()
        topic = queue_topic(PREFIX, "mail")
        rt.log.append([Append(topic, 0, b"not a record")])
        at = rt.clock.monotonic()
        envelope = Envelope(rt.clock.now_ms(), Actor("t"), (Enqueued(b"z", 1, 0, 3),))
        rt.log.append([Append(topic, 0, codec.encode(envelope))] * 3)
        rt.advance_until(
            lambda: a.metrics.snapshot_gauge(RECORDS, topic=topic, partition="0") == 4,
            "the lag of the paused partition",
            step_s=0.5,
        )
        rt.advance_until(
            lambda: (a.metrics.snapshot_gauge(SECONDS, queue="mail") or 0) >= 2,
            "its age to grow",
            step_s=0.5,
        )
        age = a.metrics.snapshot_gauge(SECONDS, queue="mail")
        assert age is not None and age <= rt.clock.monotonic() - at
        assert a.metrics.snapshot_gauge("pinledger_partition_paused", queue="mail", partition="0")
