"""Queues paused from the catalog (issue 42 part 4, decision 0035), on the fakes: the
fold and the catalog projection agree; a paused queue hands out no job on any server
(dequeueJobs, dequeueOwned, dry runs) while it still takes enqueues and acks, and hands
them out again once resumed; the gauge; the CLI's checks and the format gate."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.cli import queue_pause
from pinledger.idl import pinlater
from pinledger.ledger import codec, formats
from pinledger.ledger.events import (
    Actor,
    Envelope,
    Event,
    FormatRaised,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
)
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, LogRecord, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.catalog_log import catalog_envelopes, catalog_queues
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import CatalogProjector
from pinledger.service.testing.runtime import GONE, TEST_CONFIG, Node, Runtime, job

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=2)
PREFIX = "t"
ADMIN = Actor(source="admin")
GOLDEN = Path(__file__).parents[1] / "golden" / "v1-catalog-queue-paused.json"


def _project(envelopes: list[Envelope], records_per_batch: int) -> dict[str, bool]:
    """The catalog projected into a fake store, `records_per_batch` records a call."""
    store = FakeStore()
    projector = CatalogProjector(store, PREFIX)
    records = [
        LogRecord(catalog_topic(PREFIX), 0, i, codec.encode(e), []) for i, e in enumerate(envelopes)
    ]
    for start in range(0, len(records), records_per_batch):
        projector.apply(records[start : start + records_per_batch])
    return {row.name: row.paused for row in store.queues()}


def _golden_envelopes() -> list[Envelope]:
    document = json.loads(GOLDEN.read_text())
    return [codec.decode(r["value"].encode()) for r in document["records"]]


@pytest.mark.parametrize("batch", [1, 2, 100])
def test_the_projection_holds_what_the_fold_holds_for_the_golden_records(batch: int) -> None:
    envelopes = _golden_envelopes()
    folded = {name: row.paused for name, row in catalog_queues(envelopes).items()}
    assert folded == {"held": True, "mail": False, "old": False}
    assert _project(envelopes, batch) == folded


_NAMES = st.sampled_from(["a", "b"])
_EVENTS: st.SearchStrategy[Event] = st.one_of(
    st.builds(QueueCreated, name=_NAMES, partitions=st.just(1)),
    st.builds(QueueDeleted, name=_NAMES),
    st.builds(QueuePaused, name=_NAMES, paused=st.booleans(), reason=st.just("")),
)


@given(
    records=st.lists(st.lists(_EVENTS, min_size=1, max_size=3), max_size=12),
    batch=st.integers(1, 5),
)
def test_any_catalog_projects_to_the_pauses_it_folds_to(
    records: list[list[Event]], batch: int
) -> None:
    # Creating a queue the catalog holds already is not a record a server writes.
    envelopes: list[Envelope] = []
    live: set[str] = set()
    for events in records:
        kept: list[Event] = []
        for event in events:
            if isinstance(event, QueueCreated):
                if event.name in live:
                    continue
                live.add(event.name)
            elif isinstance(event, QueueDeleted):
                live.discard(event.name)
            kept.append(event)
        if kept:
            envelopes.append(Envelope(len(envelopes), ADMIN, tuple(kept)))
    folded = {name: row.paused for name, row in catalog_queues(envelopes).items()}
    assert _project(envelopes, batch) == folded


def _pause(rt: Runtime, queue: str, paused: bool, *nodes: Node) -> None:
    rt.writer.follow_format(formats.LATEST)
    rt.writer.pause_queue(QueuePaused(queue, paused, "a test"), rt.clock.now_ms(), GONE)
    # The catalog owner projects it; each node's queue directory re-reads it each second.
    rt.advance_until(
        lambda: {q.name: q.paused for q in rt.store.queues()}.get(queue) is paused,
        "the catalog projection to hold the pause",
    )

    def read_everywhere() -> bool:
        gauges = [n.metrics.snapshot_gauge("pinledger_queue_paused", queue=queue) for n in nodes]
        return gauges == [float(paused)] * len(nodes)

    rt.advance_until(read_everywhere, "each server's queue directory to read the pause")


def test_a_paused_queue_hands_out_no_job_on_any_server_and_resumes() -> None:
    with Runtime(CONFIG) as rt:
        a, b = rt.node(), rt.node()
        a.create_queue("mail")
        first = a.enqueue("mail", *(job(b"%d" % i) for i in range(4)))
        rt.settle()
        taken = a.dequeue("mail", 1)
        assert len(taken) == 1

        _pause(rt, "mail", True, a, b)
        for node in (a, b):
            assert node.metrics.snapshot_gauge("pinledger_queue_paused", queue="mail") == 1.0
            assert node.dequeue("mail", 10) == {}
            assert node.dequeue("mail", 10, dry_run=True) == {}
            assert node.dequeue_owned("mail", 10) == {}
        # Enqueues go on, and so do acks, piggybacked ones too.
        later = b.enqueue("mail", job(b"later"))
        assert a.dequeue("mail", 10, succeeded=list(taken)) == {}
        rt.settle()
        assert a.count("mail") == len(first) - len(taken) + len(later)  # PENDING ones
        assert a.lookup(next(iter(taken))).jobState == pinlater.PinLaterJobState.SUCCEEDED

        _pause(rt, "mail", False, a, b)
        assert a.metrics.snapshot_gauge("pinledger_queue_paused", queue="mail") == 0.0
        got: dict[str, bytes] = {}

        def served() -> bool:
            got.update(b.dequeue("mail", 10))
            return len(got) == 4

        rt.advance_until(served, "the resumed queue's jobs to be handed out")
        assert set(got) == (set(first) - set(taken)) | set(later)


def test_a_queue_created_again_starts_unpaused() -> None:
    with Runtime(CONFIG) as rt:
        a = rt.node()
        a.create_queue("mail")
        _pause(rt, "mail", True)
        rt.writer.delete_queue("mail", rt.clock.now_ms(), GONE)
        rt.advance_until(lambda: "mail" not in {q.name for q in rt.store.queues()}, "the deletion")
        a.create_queue("mail")
        assert {q.name: q.paused for q in rt.store.queues()}["mail"] is False


# -- the CLI's checks ------------------------------------------------------------------


def _log(cluster_format: int) -> FakeLog:
    """A catalog at `cluster_format` with queue "mail" (written as a release of that
    format wrote it: its first record says the format)."""
    log = FakeLog()
    log.create_topic(catalog_topic(PREFIX), 1)
    created = Envelope(0, ADMIN, (FormatRaised(cluster_format), QueueCreated("mail", 1)))
    log.append([Append(catalog_topic(PREFIX), 0, codec.encode(created))])
    return log


def test_pause_then_resume_through_the_command_checks() -> None:
    log = _log(formats.LATEST)
    said = queue_pause.pause_queue(log, PREFIX, QueuePaused("mail", True, "why"), ADMIN, lambda: 5)
    assert said.startswith("paused queue 'mail'")
    assert catalog_queues(catalog_envelopes(log, PREFIX))["mail"].paused
    again = queue_pause.pause_queue(log, PREFIX, QueuePaused("mail", True), ADMIN, lambda: 6)
    assert "already" in again
    queue_pause.pause_queue(log, PREFIX, QueuePaused("mail", False), ADMIN, lambda: 7)
    assert not catalog_queues(catalog_envelopes(log, PREFIX))["mail"].paused
    with pytest.raises(queue_pause.PauseRefusedError, match="no queue 'nope'"):
        queue_pause.pause_queue(log, PREFIX, QueuePaused("nope", True), ADMIN, lambda: 8)
    with pytest.raises(queue_pause.PauseRefusedError, match="--reason"):
        queue_pause.pause_queue(log, PREFIX, QueuePaused("mail", True, "a\x00"), ADMIN, lambda: 9)


def test_a_cluster_below_format_3_refuses_a_pause() -> None:
    log = _log(formats.GROUPED)
    with pytest.raises(queue_pause.PauseRefusedError, match="needs ledger format 3"):
        queue_pause.pause_queue(log, PREFIX, QueuePaused("mail", True), ADMIN, lambda: 5)
    writer = LedgerWriter(log, PREFIX)
    writer.follow_format(formats.GROUPED)
    with pytest.raises(formats.FormatTooOldError, match="pausing or resuming a queue"):
        writer.pause_queue(QueuePaused("mail", True), 5, ADMIN)
    assert not any(
        isinstance(e, QueuePaused) for v in catalog_envelopes(log, PREFIX) for e in v.events
    )
