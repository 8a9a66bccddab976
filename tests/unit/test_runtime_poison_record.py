"""A record no store commits, or no release decodes, already in a queue's log (issue 38;
decision 0032), on the fakes: it stops only its own partition. The server's other
queues and partitions go on serving; the partition pauses at exactly that record, with
the jobs before it projected; it is named (log, metric, /ready's list) and tried again
by itself; `pinledger skip-record` appends a skip to the catalog, and the partition
resumes past the record, as does any server that takes the partition over."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from pinledger.cli.skip_record import SkipRefusedError, skip
from pinledger.idl import pinlater
from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import JobDescriptor, local_id_for, parse
from pinledger.ledger.events import Actor, Enqueued, Envelope, RecordSkipped
from pinledger.ledger.log import Append, queue_topic
from pinledger.projections.sharded_store import ShardedStore
from pinledger.service.ownership.paused import PAUSED_GAUGE, RETRY_FIRST_S
from pinledger.service.shards.moves import Mover
from pinledger.service.testing.runtime import GONE, TEST_CONFIG, Node, Runtime, job, wait_until

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=2)
PENDING = pinlater.PinLaterJobState.PENDING
OPERATOR = Actor("pinledger:skip-record by ops@test", "", "test")
# A record no release decodes (a foreign producer's, say) and one whose custom status
# holds the NUL Postgres refuses in text (the edge refuses it; this one went around).
GARBAGE = "undecodable"
NUL = "nul"


def _poisoned(rt: Runtime, kind: str, queue: str = "mail") -> tuple[list[str], int, list[str]]:
    """The queue's partition 0: two records of good jobs, the poison record, two more;
    appended at once, so an owner finds them in one batch. Returns the descriptors
    before the poison, its offset, the descriptors after."""
    topic = queue_topic(CONFIG.topic_prefix, queue)

    def enqueue(body: bytes, status: str = "") -> bytes:
        return codec.encode(Envelope(rt.clock.now_ms(), GONE, (Enqueued(body, 1, 0, 3, status),)))

    poison = b"\x00not a pinledger record" if kind == GARBAGE else enqueue(b"p", "a\x00b")
    values = [enqueue(b"before 1"), enqueue(b"before 2"), poison]
    values += [enqueue(b"after 1"), enqueue(b"after 2")]
    offsets = rt.log.append([Append(topic, 0, v) for v in values])
    named = [str(JobDescriptor(queue, 0, 1, local_id_for(o, 0))) for o in offsets]
    return named[:2], offsets[2], named[3:]


def _start(rt: Runtime) -> Node:
    node = rt.node()
    node.create_queue("mail")
    node.create_queue("other")
    rt.wait_serving("mail", 2, [node])
    rt.wait_serving("other", 2, [node])
    rt.settle()
    return node


def _paused_at(node: Node, offset: int, queue: str = "mail") -> None:
    wait_until(
        lambda: f"{queue}[0]" in node.owner.paused_partitions(),
        f"queue {queue}'s partition 0 to pause",
    )
    said = node.owner.paused_partitions()[f"{queue}[0]"]
    assert said.startswith(f"paused at offset {offset}: ")
    assert f"pinledger skip-record --queue {queue} --partition 0 --offset {offset}" in said
    assert node.metrics.snapshot_gauge(PAUSED_GAUGE, queue=queue, partition="0") == 1.0


def _dequeued(rt: Runtime, node: Node, queue: str, wanted: set[str]) -> dict[str, bytes]:
    got: dict[str, bytes] = {}

    def served() -> bool:
        got.update(node.dequeue(queue, 50))
        return wanted <= set(got)

    rt.advance_until(served, f"{sorted(wanted)} to be dequeued from {queue}")
    return got


def _skip(rt: Runtime, offset: int, queue: str = "mail") -> str:
    return skip(
        rt.log,
        rt.ledger_store,
        CONFIG.topic_prefix,
        RecordSkipped(queue, 0, offset, "poison: a test"),
        OPERATOR,
        rt.clock.now_ms,
        lambda _: None,
    )


@pytest.mark.parametrize("kind", [NUL, GARBAGE])
def test_a_poison_record_pauses_only_its_partition_and_a_skip_resumes_it(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pinledger.service.ownership.paused")
    with Runtime(CONFIG) as rt:
        rt.store.refuse_text_containing("\x00")  # as Postgres
        node = _start(rt)
        before, offset, after = _poisoned(rt, kind)
        _paused_at(node, offset)
        # The batch was narrowed down to the record: the jobs before it are projected.
        assert {node.lookup(d).jobState for d in before} == {PENDING}
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        assert rt.store.offsets([(topic, 0)]) == {(topic, 0): offset}

        # Only that partition stops: the server's other queue and the queue's other
        # partition serve, in the passes the paused one fails in.
        assert node.serving() == [("mail", 1), ("other", 0), ("other", 1)]
        assert node.owner.unavailable is None
        others = [d for i in range(4) for d in node.enqueue("other", job(b"o%d" % i))]
        _dequeued(rt, node, "other", set(others))
        mail = [d for i in range(4) for d in node.enqueue("mail", job(b"m%d" % i))]
        on_one = {d for d in mail if parse(d).partition == 1}
        assert _dequeued(rt, node, "mail", on_one).keys() == on_one

        # Tried again by itself, without another line about it.
        rt.clock.advance(RETRY_FIRST_S * 3)
        rt.wait_passes(3)
        assert "mail[0]" in node.owner.paused_partitions()
        pauses = [r for r in caplog.records if "paused at offset" in r.getMessage()]
        assert len(pauses) == 1, [r.getMessage() for r in pauses]
        assert "pinledger skip-record --queue mail --partition 0" in pauses[0].getMessage()

        said = _skip(rt, offset)
        assert f"skipped mail[0] offset {offset}" in said
        wait_until(lambda: not node.owner.paused_partitions(), "the partition to resume")
        assert node.metrics.snapshot_gauge(PAUSED_GAUGE, queue="mail", partition="0") == 0.0
        assert any("resumed past offset" in r.getMessage() for r in caplog.records)
        # The jobs before and after the record are served; the record's never exists.
        on_zero = set(before) | set(after) | {d for d in mail if parse(d).partition == 0}
        _dequeued(rt, node, "mail", on_zero)
        assert rt.store.skipped_records("mail", 0) == {offset: "poison: a test"}


def test_a_server_taking_the_partition_over_passes_over_the_skipped_record() -> None:
    with Runtime(CONFIG) as rt:
        rt.store.refuse_text_containing("\x00")
        first = _start(rt)
        before, offset, after = _poisoned(rt, NUL)
        _paused_at(first, offset)
        # Another server taking the partition over stalls on the same record, alone.
        first.stop()
        second = rt.node()
        _paused_at(second, offset)
        assert ("other", 0) in second.serving()
        second.stop()

        _skip(rt, offset)  # while no server runs: the next one reads it from the catalog
        third = rt.node()
        rt.wait_serving("mail", 2, [third])
        _dequeued(rt, third, "mail", set(before) | set(after))
        assert third.owner.paused_partitions() == {}


def test_the_owner_resumes_within_seconds_when_another_server_projects_the_skip() -> None:
    """The catalog's owner projects the skip; the paused partition's owner, another
    server, sees it in its store within SKIP_CHECK_S, before its next try is due."""
    with Runtime(CONFIG) as rt:
        rt.store.refuse_text_containing("\x00")
        first = _start(rt)
        second = rt.node()
        # Sticky: the first keeps the catalog and "mail", the second takes "other".
        rt.wait_serving("other", 2, [second])
        assert first.owner.partitions.catalog is not None
        assert second.owner.partitions.catalog is None
        before, offset, after = _poisoned(rt, NUL, "other")
        _paused_at(second, offset, "other")
        key = (queue_topic(CONFIG.topic_prefix, "other"), 0)
        next_try = second.owner.partitions.pauses.paused[key].retry_at
        _skip(rt, offset, "other")
        rt.advance_until(
            lambda: not second.owner.paused_partitions(), "the partition to resume", step_s=0.05
        )
        assert rt.clock.monotonic() < next_try
        _dequeued(rt, second, "other", set(before) | set(after))


def test_on_store_shards_the_partition_pauses_alone_and_moves_past_its_skipped_record() -> None:
    """On two store shards alike (decision 0031): the partition on shard a pauses while
    the others serve, resumes once skipped, and a move of it to shard b replays its log
    into b passing over the record."""
    with Runtime(CONFIG, shards=2) as rt:
        for shard in rt.shards.values():
            shard.refuse_text_containing("\x00")
        node = _start(rt)
        before, offset, after = _poisoned(rt, NUL)
        _paused_at(node, offset)
        assert sorted(node.serving()) == [("mail", 1), ("other", 0), ("other", 1)]
        _skip(rt, offset)
        wait_until(lambda: not node.owner.paused_partitions(), "the partition to resume")
        _dequeued(rt, node, "mail", set(before) | set(after))

        assert isinstance(rt.ledger_store, ShardedStore) and rt.shard_map is not None
        assert rt.store.queues()[0].shard_of(0) == "a"
        rt.writer.follow_format(formats.LATEST)
        said: list[str] = []
        mover = Mover(rt.ledger_store, rt.log, rt.writer, rt.shard_map, GONE, said.append, 0.2)
        mover.move("mail", 0, "b", rt.clock.now_ms)
        assert rt.store.queues()[0].shard_of(0) == "b"
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        end = rt.log.end_offset(topic, 0)
        assert rt.shards["b"].offsets([(topic, 0)]) == {(topic, 0): end}
        # Served from b from now on.
        [late] = rt.writer.enqueue("mail", 0, [Enqueued(b"late", 1, 0, 3)], 0, GONE)
        _dequeued(rt, node, "mail", {str(late)})


def test_skip_record_refuses_what_it_cannot_skip() -> None:
    with Runtime(CONFIG) as rt:
        node = _start(rt)
        [done] = node.enqueue("mail", job(b"projected"))
        rt.settle()
        at = parse(done)
        topic = queue_topic(CONFIG.topic_prefix, "mail")
        end = rt.log.end_offset(topic, at.partition)

        def refused(partition: int, offset: int, queue: str = "mail") -> str:
            with pytest.raises(SkipRefusedError) as raised:
                skip(
                    rt.log,
                    rt.store,
                    CONFIG.topic_prefix,
                    RecordSkipped(queue, partition, offset, ""),
                    OPERATOR,
                    rt.clock.now_ms,
                    lambda _: None,
                )
            return str(raised.value)

        assert f"holds offsets below {end}" in refused(at.partition, end)
        assert "projected already" in refused(at.partition, at.local_id // 1000)
        assert "no queue 'nope'" in refused(0, 0, queue="nope")
        assert "partitions 0..1, not 5" in refused(5, 0)
