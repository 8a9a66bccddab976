"""Owned partitions across a rebalance and the dequeues they answer: a revoked
partition stops serving at once, a caught-up one starts, and a dequeue takes the best
jobs across the serving partitions, one claim record per partition, giving the jobs
back when the append certainly wrote nothing, and holding them until the projection
has passed the log's end when it may have written the claim."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from pinledger.ledger.events import Actor, Claimed, Succeeded
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import Append, LogError, NotAppendedError
from pinledger.ledger.writer import LedgerWriter, Traced
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.claims import Claims, serving_parts
from pinledger.service.ownership.partitions import Owned
from tests.unit.factories import NOW, make_job
from tests.unit.ownership_fixtures import RecordingWriter, make_owned, make_partitions

WORKER = Actor(source="worker:1", server="s1")


def serving_claims(*owned: Owned) -> tuple[Claims, RecordingWriter]:
    """Dequeues from these partitions, all serving, appending to a RecordingWriter."""
    partitions = make_partitions(*owned)
    partitions.promote()
    writer = RecordingWriter()
    return Claims("s1", NOW, partitions, cast(LedgerWriter, writer), Metrics()), writer


def test_a_partition_serves_once_caught_up_and_stops_at_once_when_revoked() -> None:
    behind = make_owned(0, next_offset=5, target=9)
    caught_up = make_owned(1, next_offset=9, target=9)
    partitions = make_partitions(behind, caught_up)
    partitions.promote()
    assert [o.partition for o in partitions.serving()] == [1]
    partitions.revoked([("p.q.mail", 1)])
    assert partitions.serving() == []
    # Revocation alone (the first half of an eager rebalance) keeps the buffers.
    partitions.rebalance()
    assert set(partitions.owned) == {("p.q.mail", 0), ("p.q.mail", 1)}


def test_a_new_queue_is_served_when_its_partitions_here_serve() -> None:
    owned = make_owned(0, next_offset=3, target=3)
    partitions = make_partitions(owned)
    assert not partitions.all_serving([("p.q.mail", 0)])
    partitions.promote()
    assert partitions.all_serving([("p.q.mail", 0)])
    assert not partitions.all_serving([("p.q.mail", 0), ("p.q.mail", 1)])


def test_a_dequeue_takes_the_best_jobs_across_partitions_one_claim_record_each() -> None:
    a = make_owned(0, [make_job(local_id=1, priority=2), make_job(local_id=2, priority=1)])
    b = make_owned(1, [make_job(local_id=3, priority=1, run_after=NOW - 1)])
    claims, writer = serving_claims(a, b)
    claimed = claims.dequeue("mail", 2, NOW, WORKER)
    assert [(c.partition, c.job.local_id) for c in claimed] == [(0, 2), (1, 3)]
    appended = [
        (p, [e.local_id for e in events if isinstance(e, Claimed)])
        for _, p, events in writer.appended
    ]
    assert sorted(appended) == [(0, [2]), (1, [3])]
    claim = {e.claim for _, _, events in writer.appended for e in events if isinstance(e, Claimed)}
    assert claim == {"s1:" + str(NOW) + ":worker:1:1"}
    # Reserved until the claims are projected: never handed out twice.
    assert [c.job.local_id for c in claims.dequeue("mail", 5, NOW, WORKER)] == [1]
    assert claims.dequeue("mail", 5, NOW, WORKER) == []


def test_jobs_whose_claim_was_not_appended_are_handed_out_again() -> None:
    owned = make_owned(0, [make_job(local_id=1)])
    claims, writer = serving_claims(owned)
    writer.failing = True
    with pytest.raises(NotAppendedError):
        claims.dequeue("mail", 1, NOW, WORKER)
    writer.failing = False
    assert [c.job.local_id for c in claims.peek("mail", 5, NOW)] == [1]
    assert [c.job.local_id for c in claims.dequeue("mail", 1, NOW, WORKER)] == [1]


def _in_doubt(log: FakeLog) -> tuple[Owned, Claims]:
    """A partition of p.q.mail (3 records in `log`, all projected) whose one job's claim
    append failed without saying whether it landed."""
    log.create_topic("p.q.mail", 1)
    log.append([Append("p.q.mail", 0, b"r")] * 3)
    owned = make_owned(0, [make_job(local_id=1)], next_offset=3)
    partitions = make_partitions(owned, log=log)
    partitions.promote()
    writer = RecordingWriter()
    claims = Claims("s1", NOW, partitions, cast(LedgerWriter, writer), Metrics())
    writer.failing, writer.failure = True, LogError
    with pytest.raises(LogError):
        claims.dequeue("mail", 1, NOW, WORKER)
    writer.failing = False
    return owned, claims


def test_jobs_whose_claim_may_have_landed_wait_for_the_projection_to_pass_the_log_end() -> None:
    log = FakeLog()
    owned, claims = _in_doubt(log)
    partitions = claims.partitions
    assert claims.dequeue("mail", 1, NOW, WORKER) == []
    log.append([Append("p.q.mail", 0, b"the claim?")])  # lands at offset 3, the new end
    partitions.settle_doubts(0.0)
    assert claims.dequeue("mail", 1, NOW, WORKER) == [], "released before projected"
    cast(SimpleNamespace, owned.projector).next_offset = 4  # it was not the claim
    partitions.settle_doubts(0.0)
    assert [c.job.local_id for c in claims.dequeue("mail", 1, NOW, WORKER)] == [1]


def test_a_projected_claim_settles_the_doubt_and_its_job_is_never_handed_out() -> None:
    owned, claims = _in_doubt(FakeLog())
    owned.buffer.update({1: None}, claimed={1})  # projected: the job is IN_PROGRESS
    claims.partitions.settle_doubts(0.0)
    assert owned.buffer.doubts == []
    assert claims.dequeue("mail", 1, NOW, WORKER) == []


def test_jobs_in_doubt_stay_reserved_while_the_log_end_cannot_be_read() -> None:
    log = FakeLog()
    _, claims = _in_doubt(log)
    log.fail("Kafka is down", operations=["end_offsets"])
    claims.partitions.settle_doubts(10.0)
    log.heal()
    claims.partitions.settle_doubts(10.5)  # read again only a second after it failed
    assert claims.dequeue("mail", 1, NOW, WORKER) == []
    claims.partitions.settle_doubts(11.0)
    assert [c.job.local_id for c in claims.dequeue("mail", 1, NOW, WORKER)] == [1]


def _acks(*partitions: int) -> Traced:
    """A dequeue's piggybacked acks: one success per partition, in the call's context."""
    return ([("mail", p, [Succeeded(local_id=100 + p)]) for p in partitions], "00-ack-01")


def test_piggybacked_acks_go_out_with_the_claims_in_one_round_trip_acks_first() -> None:
    owned = make_owned(0, [make_job(local_id=1)])
    claims, writer = serving_claims(owned)
    claimed = claims.dequeue("mail", 1, NOW, WORKER, alongside=_acks(0, 1))
    assert [c.job.local_id for c in claimed] == [1]
    (trip,) = writer.round_trips
    kinds = [(p, type(events[0]).__name__, tp) for (_, p, events), tp in trip]
    # The acks keep the call's trace context; the claim has its own span's.
    assert kinds[:2] == [(0, "Succeeded", "00-ack-01"), (1, "Succeeded", "00-ack-01")]
    assert kinds[2][:2] == (0, "Claimed") and kinds[2][2] != "00-ack-01"


def test_piggybacked_acks_are_appended_when_nothing_is_claimed() -> None:
    claims, writer = serving_claims(make_owned(0, []))
    assert claims.dequeue("mail", 5, NOW, WORKER, alongside=_acks(2)) == []
    assert claims.dequeue("mail", 0, NOW, WORKER, alongside=_acks(3)) == []
    assert [[(p, tp) for (_, p, _), tp in trip] for trip in writer.round_trips] == [
        [(2, "00-ack-01")],
        [(3, "00-ack-01")],
    ]


def test_a_failed_round_trip_of_acks_and_claims_gives_the_jobs_back() -> None:
    owned = make_owned(0, [make_job(local_id=1)])
    claims, writer = serving_claims(owned)
    writer.failing = True
    with pytest.raises(NotAppendedError):
        claims.dequeue("mail", 1, NOW, WORKER, alongside=_acks(0))
    writer.failing = False
    assert writer.appended == []
    assert [c.job.local_id for c in claims.dequeue("mail", 1, NOW, WORKER)] == [1]


def test_partial_coverage_looks_at_a_share_of_the_serving_partitions() -> None:
    parts = [make_owned(p) for p in range(4)]
    for o in parts:
        o.serving = True
    assert len(serving_parts(parts, "mail", 1.0)) == 4
    assert len(serving_parts(parts, "mail", 0.5)) == 2
    assert len(serving_parts(parts, "mail", 0.01)) == 1
    assert serving_parts(parts, "thumbs", 1.0) == []
