"""A server whose wall clock lags on the fakes: the claims heartbeated through it are
stamped with its clock (a checkpoint's record time is the receiving server's), and the
owner of their partition, whose clock is right, must not time them out while they are
heartbeated; once the heartbeats stop, the claim times out as usual."""

from __future__ import annotations

import pytest

from pinledger.idl import pinlater
from pinledger.service.testing.runtime import TEST_CONFIG, Runtime, job

TIMEOUT_S = TEST_CONFIG.claim_timeout_s
# About the claim timeout: a checkpoint through this server is stamped as if it were
# older than a third of the timeout, the heartbeat interval.
LAG_S = TIMEOUT_S - 5
State = pinlater.PinLaterJobState


def test_a_claim_heartbeated_through_a_lagging_server_never_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Runtime() as rt:
        owner = rt.node()
        lagging = rt.node(clock_skew_s=-LAG_S)
        owner.create_queue("mail")
        rt.advance_until(
            lambda: bool(owner.serving()) and bool(lagging.serving()),
            "the two servers to share the partitions",
        )
        for body in (b"a", b"b"):  # one in each partition (round robin by call)
            owner.enqueue("mail", job(body))
        rt.settle()
        [d] = owner.dequeue("mail", 1)  # from the owner's own partition
        rt.settle()

        # A worker heartbeats every third of the timeout, through the lagging server,
        # for three timeouts.
        for _ in range(9):
            rt.clock.advance(TIMEOUT_S / 3)
            rt.settle()  # the owner has checked its claims at this time
            assert owner.lookup(d).jobState == State.IN_PROGRESS
            lagging.checkpoint("mail", d)
            rt.settle()
        assert "TimedOut" not in [s.action for s in owner.history(d).steps]
        assert any("lags" in r.getMessage() for r in caplog.records)  # the operator is told

        # The heartbeats stop: the claim times out a timeout after the last one.
        rt.clock.advance(TIMEOUT_S)
        rt.settle()
        assert owner.lookup(d).jobState == State.PENDING
        assert [s.action for s in owner.history(d).steps][-1] == "TimedOut"
