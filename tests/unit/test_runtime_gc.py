"""Garbage collection on the fakes: once the GC interval has passed, a finished job past
its TTL becomes a Collected record; its row is gone, its history stays. A failed job
waits for the longer failed TTL."""

from __future__ import annotations

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Runtime, job

State = pinlater.PinLaterJobState


def test_finished_jobs_past_their_ttl_are_collected_and_their_history_kept() -> None:
    assert TEST_CONFIG.succeeded_ttl_s < TEST_CONFIG.failed_ttl_s
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        [done, failed] = node.enqueue("mail", job(b"done"), job(b"failed", attempts=1))
        rt.settle()
        assert set(node.dequeue("mail", 2)) == {done, failed}
        node.ack("mail", succeeded=[done], failed=[failed])
        rt.settle()
        assert node.lookup(done).jobState == State.SUCCEEDED
        assert node.lookup(failed).jobState == State.FAILED

        rt.clock.advance(TEST_CONFIG.succeeded_ttl_s - 1)
        rt.settle()
        assert node.lookup(done) is not None  # not yet

        rt.clock.advance(1 + TEST_CONFIG.gc_interval_s)
        rt.settle()
        assert node.lookup(done) is None
        # The same collection left the failed job alone: its TTL is longer.
        assert node.lookup(failed).jobState == State.FAILED
        history = node.history(done)
        actions = [s.action for s in history.steps]
        assert actions == ["Enqueued", "Claimed", "Succeeded", "Collected"]
        assert history.job is None

        rt.clock.advance(TEST_CONFIG.failed_ttl_s)
        rt.settle()
        assert node.lookup(failed) is None
        assert [s.action for s in node.history(failed).steps][-1] == "Collected"
