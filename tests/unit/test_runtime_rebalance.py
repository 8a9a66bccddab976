"""Rebalances on the fakes: two owners in one group share a queue's partitions and a
dequeue on either is topped up from the other's; when one stops, or its session runs
out on the clock, the other adopts its partitions and serves their jobs; a claim the
zombie appends late loses to the claim already in the log, and the job's history shows
it rejected."""

from __future__ import annotations

import dataclasses

from pinledger.idl import pinlater
from pinledger.service.observability import catalogue
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

SESSION_S = 10
PARTITIONS = 4
CONFIG = dataclasses.replace(
    TEST_CONFIG, session_timeout_ms=SESSION_S * 1000, partitions=PARTITIONS
)


def _two_owners(rt: Runtime) -> tuple[Node, Node, list[str]]:
    """Two servers sharing `mail`, one job in each of its partitions."""
    a, b = rt.node(), rt.node()
    a.create_queue("mail")
    everything = [("mail", p) for p in range(PARTITIONS)]
    # b learns of the queue from its queue directory, which re-reads every second.
    rt.advance_until(
        lambda: bool(b.serving()) and sorted(a.serving() + b.serving()) == everything,
        "the two servers to share the partitions",
    )
    # Each knows the other's partitions (its members tick, every second of clock time):
    # what a dequeue is topped up from. Under load the tick could come after the owners
    # serve, and a dequeue then found no peer to ask.
    rt.advance_until(
        lambda: bool(a.owner.peers_for("mail")) and bool(b.owner.peers_for("mail")),
        "each server to know the other's partitions",
    )
    jobs = [d for i in range(PARTITIONS) for d in a.enqueue("mail", job(b"%d" % i))]
    rt.settle()
    return a, b, jobs


def test_two_owners_share_the_partitions_and_a_dequeue_is_topped_up_from_the_other() -> None:
    with Runtime(CONFIG) as rt:
        a, b, jobs = _two_owners(rt)
        assert a.serving() and b.serving()
        assert sorted({int(d.split(":")[1][1:]) for d in jobs}) == list(range(PARTITIONS))
        assert set(b.dequeue("mail", PARTITIONS)) == set(jobs)


def test_when_an_owner_stops_the_other_adopts_its_partitions_and_serves_their_jobs() -> None:
    with Runtime(CONFIG) as rt:
        a, b, jobs = _two_owners(rt)
        b.stop()
        rt.wait_serving("mail", PARTITIONS, [a])
        assert set(a.dequeue("mail", PARTITIONS)) == set(jobs)


def test_an_owner_frozen_past_its_session_hands_out_nothing_once_it_wakes() -> None:
    """The lease (service/ownership/lease.py, decision 0039): a server that stalled past
    its session timeout has lost its partitions to another by the time it runs again;
    it hands out none of their jobs (which the other may hand out too) until the group
    confirms it again."""
    with Runtime(CONFIG) as rt:
        a, zombie, jobs = _two_owners(rt)
        zombie.freeze()  # stops polling; its handler still answers from its buffers
        rt.clock.advance(SESSION_S + 1)  # its session runs out
        rt.wait_serving("mail", PARTITIONS, [a])
        # Whatever it answers comes from the live owner (forwarded): claimed by s1.
        handed = set(zombie.dequeue("mail", PARTITIONS))
        rt.settle()
        assert all(a.lookup(d).claimDescriptor.startswith("s1:") for d in handed)
        assert zombie.metrics.snapshot_counter(catalogue.OWNER_LEASE_LAPSES_TOTAL) == 1
        assert handed | set(a.dequeue("mail", PARTITIONS)) == set(jobs)


def test_a_late_claim_of_a_zombie_owner_is_rejected_and_shown_in_the_history() -> None:
    """Log order arbitrates what fencing misses: a claim that lands after the next owner
    claimed the job (here a zombie whose lease check is made to pass) is rejected."""
    with Runtime(CONFIG) as rt:
        a, zombie, jobs = _two_owners(rt)
        zombie.freeze()
        rt.clock.advance(SESSION_S + 1)
        rt.wait_serving("mail", PARTITIONS, [a])
        assert set(a.dequeue("mail", PARTITIONS)) == set(jobs)
        rt.settle()

        zombie.owner.lease.attach(rt.clock.monotonic)  # as if just confirmed
        [late] = zombie.dequeue("mail", 1)  # appends a claim for a job `a` claimed
        rt.settle()
        info = a.lookup(late)
        assert info.jobState == pinlater.PinLaterJobState.IN_PROGRESS
        assert info.claimDescriptor.startswith("s1:")
        claims = [s for s in a.history(late).steps if s.action == "Claimed"]
        assert [(s.server, s.applied) for s in claims] == [("s1", True), ("s2", False)]
        assert claims[1].reason.startswith("claim: job is already claimed by s1:")
