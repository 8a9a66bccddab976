"""The worker's outbox and counters, with a fake server and a fake clock: checkpoints
reach the server before the acks of their jobs, nothing is lost when a call fails, the
held claims are the ones not yet acked or released, acks wait at most MAX_ACK_DELAY_S,
and a flush at shutdown gives up (naming the claims left) only after its timeout."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable

import pytest

from pinledger.client.errors import ServerUnavailableError
from pinledger.client.jobs import Ack, Checkpoint
from pinledger.client.worker import WorkerCounters
from pinledger.client.worker.heartbeat import beat, heartbeat_thread
from pinledger.client.worker.outbox import MAX_ACK_DELAY_S, Outbox
from pinledger.client.worker.outcome import RUN_OUTCOMES, Outcome
from pinledger.ledger.fake_clock import FakeClock

Q = "q"
A, B, C = "q:s1:p0:1", "q:s1:p0:2", "q:s1:p0:3"


class FakeServer:
    """Records the calls in order; the next `failures` calls raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.failures = 0
        self.called = threading.Event()

    def _call(self, name: str, what: list[str]) -> None:
        if self.failures:
            self.failures -= 1
            raise ServerUnavailableError("no server answered")
        self.calls.append((name, what))
        self.called.set()

    def ack(self, queue: str, succeeded: Iterable[Ack] = (), failed: Iterable[Ack] = ()) -> None:
        self._call(
            "ack",
            [f"ok {a.descriptor}" for a in succeeded] + [f"failed {a.descriptor}" for a in failed],
        )

    def checkpoint(self, queue: str, checkpoints: Iterable[Checkpoint]) -> None:
        self._call("checkpoint", [c.descriptor for c in checkpoints])


class SteppingClock(FakeClock):
    """A fake clock whose sleep moves time on by the time slept (for a loop that only
    sleeps, with nobody else to advance the clock)."""

    def sleep(self, seconds: float, interrupt: threading.Event | None = None) -> bool:
        self.advance(seconds)
        return False


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


def outbox(server: FakeServer, clock: FakeClock | None = None, batch_size: int = 10) -> Outbox:
    return Outbox(server, Q, batch_size=batch_size, clock=clock or FakeClock(), name="w")


def test_a_checkpoint_reaches_the_server_before_the_ack_of_its_job(server: FakeServer) -> None:
    box = outbox(server)
    box.hold([A, B])
    # A failed under `never`: its budget is lowered, then its failure acked.
    box.add(ack=(False, Ack(A)), checkpoint=Checkpoint(A, attempts_allowed=1))
    box.add(ack=(True, Ack(B)), checkpoint=None)
    # A dequeue may carry B's ack now, not A's.
    assert [a.descriptor for _, a in box.take_acks()] == [B]
    assert box.flush()
    assert server.calls == [("checkpoint", [A]), ("ack", [f"failed {A}"])]


def test_a_failed_ack_call_keeps_the_acks_and_their_claims(server: FakeServer) -> None:
    box = outbox(server)
    box.hold([A, B])
    box.add(ack=(True, Ack(A)), checkpoint=None)
    box.add(ack=(False, Ack(B)), checkpoint=None)
    server.failures = 1
    assert not box.send_acks()
    assert box.held() == [A, B]
    assert box.send_acks()
    assert server.calls == [("ack", [f"ok {A}", f"failed {B}"])]
    assert box.held() == []


def test_acks_put_back_after_a_failed_dequeue_go_out_first(server: FakeServer) -> None:
    box = outbox(server)
    box.add(ack=(True, Ack(A)), checkpoint=None)
    taken = box.take_acks()
    box.add(ack=(True, Ack(B)), checkpoint=None)
    box.put_back(taken)
    assert [a.descriptor for _, a in box.take_acks()] == [A, B]


def test_a_failed_checkpoint_call_keeps_the_checkpoints_and_holds_back_their_acks(
    server: FakeServer,
) -> None:
    box = outbox(server)
    box.hold([A])
    box.add(ack=(False, Ack(A)), checkpoint=Checkpoint(A, attempts_allowed=1))
    server.failures = 1
    assert not box.flush()
    assert box.has_checkpoints() and box.has_acks()
    assert box.flush()
    assert server.calls == [("checkpoint", [A]), ("ack", [f"failed {A}"])]


def test_held_claims_end_with_their_ack_or_their_last_checkpoint(server: FakeServer) -> None:
    box = outbox(server)
    box.hold([A, B, C])
    box.add(ack=None, checkpoint=Checkpoint(A, move_to_pending=True))  # rescheduled
    box.release(B)  # handed back at shutdown
    box.add(ack=(False, Ack(C)), checkpoint=Checkpoint(C, attempts_allowed=1))
    assert box.send_checkpoints()
    assert box.held() == [C]  # C's checkpoint did not end its claim: its ack does
    assert box.send_acks()
    assert box.held() == []


def test_acks_are_due_after_the_delay_or_when_a_batch_is_full(server: FakeServer) -> None:
    clock = FakeClock()
    box = outbox(server, clock, batch_size=3)
    assert not box.acks_due()
    box.add(ack=(True, Ack(A)), checkpoint=None)
    assert not box.acks_due()
    clock.advance(MAX_ACK_DELAY_S)
    assert box.acks_due()
    box.take_acks()
    for d in (A, B):
        box.add(ack=(True, Ack(d)), checkpoint=None)
    assert not box.acks_due()
    box.add(ack=(True, Ack(C)), checkpoint=None)
    assert box.acks_due()


def test_a_flush_at_shutdown_retries_until_the_server_answers(server: FakeServer) -> None:
    box = outbox(server, SteppingClock())
    box.hold([A])
    box.release(A)
    server.failures = 2
    box.flush_all(timeout_s=60, claim_timeout_s=600)
    assert server.calls == [("checkpoint", [A])]
    assert box.held() == []


def test_a_flush_at_shutdown_gives_up_after_its_timeout_naming_the_claims_left(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SteppingClock()
    box = outbox(server, clock)
    box.hold([A, B])
    box.release(A)
    box.release(B)
    server.failures = 1000
    started = clock.monotonic()
    with caplog.at_level(logging.ERROR, "pinledger.worker"):
        box.flush_all(timeout_s=1.0, claim_timeout_s=600)
    # Tried at 0, 0.2 and 0.6 s; the next pause (0.8 s) would pass the deadline.
    assert server.failures == 1000 - 3
    assert clock.monotonic() - started == pytest.approx(0.6)
    assert (
        f"2 jobs keep their claims until the claim timeout (600 s), then run again: {A}, {B}"
        in caplog.text
    )


def test_a_heartbeat_renews_every_held_claim_and_survives_a_failure(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    box = outbox(server)
    beat(server, Q, box, "w", 600)
    assert server.calls == []  # nothing held, nothing sent
    box.hold([B, A])
    server.failures = 1
    with caplog.at_level(logging.WARNING, "pinledger.worker"):
        beat(server, Q, box, "w", 600)
    assert "heartbeat of 2 jobs failed" in caplog.text
    beat(server, Q, box, "w", 600)
    assert server.calls == [("checkpoint", [A, B])]


def test_the_heartbeat_thread_beats_every_interval_until_done(server: FakeServer) -> None:
    clock = FakeClock()
    box = outbox(server, clock)
    box.hold([A])
    done = threading.Event()
    thread = heartbeat_thread(
        server, Q, box, interval_s=200, claim_timeout_s=600, clock=clock, done=done, name="w"
    )
    thread.start()
    assert server.calls == []  # the first beat comes one interval after the start
    # The thread may not be asleep yet when the clock first moves: move it until a
    # beat arrives.
    for _ in range(1000):
        clock.advance(200)
        if server.called.wait(0.01):
            break
    assert server.calls and set(map(str, server.calls)) == {str(("checkpoint", [A]))}
    done.set()
    thread.join(10)
    assert not thread.is_alive()


def test_counters_count_each_outcome_once() -> None:
    counters = WorkerCounters()
    for outcome in [*RUN_OUTCOMES, Outcome.RETRIED]:
        counters.count(outcome, seconds=0.25)
    counters.released += 2
    assert dataclasses.asdict(counters) == {
        "processed": 5,
        "succeeded": 1,
        "retried": 2,
        "failed": 1,
        "rescheduled": 1,
        "released": 2,
        "handler_seconds": 1.25,
    }
    assert counters.by_outcome() == {
        "succeeded": 1,
        "retried": 2,
        "failed": 1,
        "rescheduled": 1,
        "released": 2,
    }
    assert counters.summary() == (
        "5 processed (1 succeeded, 2 retried, 1 failed, 1 rescheduled), 2 released"
    )


def test_there_is_a_counter_for_every_outcome() -> None:
    fields = {f.name for f in dataclasses.fields(WorkerCounters)}
    assert fields == {
        *("processed", "released", "succeeded", "retried", "failed", "rescheduled"),
        "handler_seconds",
    }
    assert len(RUN_OUTCOMES) == 4
