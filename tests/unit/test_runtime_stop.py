"""A server that stops on the fakes hands out no job after it has left the owners' group:
it stops serving its partitions first, and leaves only once its claims in flight are in
the log, below the end the next owner catches up to before it serves. So a job is
handed out once, whichever server the dequeues reach while one of them stops."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Sequence

from pinledger.ledger import codec
from pinledger.ledger.events import Claimed
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job, wait_until
from tests.unit.held_log import HeldLog

PARTITIONS = 4
CONFIG = dataclasses.replace(TEST_CONFIG, partitions=PARTITIONS)
EVERYTHING = [("mail", p) for p in range(PARTITIONS)]
# Real time a test gives the other owner to take the stopping one's partitions over,
# where it must not (on the fakes it takes a few owner passes, milliseconds).
TAKE_OVER_S = 1.0


def _two_owners(rt: Runtime, per_partition: int) -> tuple[Node, Node, list[str]]:
    """Two servers sharing `mail`, each knowing the other's partitions, with
    `per_partition` jobs in each partition."""
    a, b = rt.node(), rt.node()
    a.create_queue("mail")
    rt.advance_until(
        lambda: bool(b.serving()) and sorted(a.serving() + b.serving()) == EVERYTHING,
        "the two servers to share the partitions",
    )
    rt.advance_until(
        lambda: bool(a.owner.peers_for("mail")) and bool(b.owner.peers_for("mail")),
        "each server to know the other's partitions",
    )
    jobs = [
        d
        for i in range(per_partition)
        for p in range(PARTITIONS)
        for d in a.enqueue("mail", job(b"%d.%d" % (p, i)))
    ]
    rt.settle()
    return a, b, jobs


def _claims_by(rt: Runtime, server: str) -> int:
    """The claim events `server` has appended to `mail` so far."""
    topic = rt.writer.topic("mail")
    return sum(
        1
        for p in range(PARTITIONS)
        for record in rt.log.records(topic, p)
        for part in codec.decode_parts(record.value, record.headers)
        if part.envelope.actor.server == server
        for event in part.envelope.events
        if isinstance(event, Claimed)
    )


def _twice(handed: Sequence[str]) -> list[str]:
    return sorted(d for d, n in Counter(handed).items() if n > 1)


def test_a_stopping_server_leaves_the_group_only_once_its_claim_in_flight_is_in_the_log() -> None:
    with Runtime(CONFIG) as rt:
        a, b, jobs = _two_owners(rt, per_partition=2)
        held = HeldLog(b.writer.group.log)
        b.writer.group.log = held
        handed: list[str] = []
        claiming = threading.Thread(target=lambda: handed.extend(b.dequeue("mail", 1)), daemon=True)
        claiming.start()
        assert held.entered.wait(10), "b's dequeue never appended its claim"

        stopping = threading.Thread(target=b.stop, daemon=True)
        stopping.start()
        # Had b left the group now, `a` would serve b's partitions before b's claim is in
        # the log, and hand out the job b is claiming.
        with contextlib.suppress(AssertionError):  # b keeps its partitions meanwhile
            wait_until(lambda: a.serving() == EVERYTHING, "a to serve", timeout_s=TAKE_OVER_S)
        handed.extend(a.dequeue("mail", len(jobs)))
        held.release.set()
        claiming.join(10)
        stopping.join(10)
        assert not stopping.is_alive()

        rt.wait_serving("mail", PARTITIONS, [a])
        rt.settle()
        handed.extend(a.dequeue("mail", len(jobs)))
        assert _twice(handed) == []
        assert sorted(handed) == sorted(jobs)


def test_dequeues_running_on_a_server_while_it_stops_never_get_a_job_twice() -> None:
    with Runtime(CONFIG) as rt:
        a, b, jobs = _two_owners(rt, per_partition=250)
        handed: list[str] = []
        done = threading.Event()

        failures: list[str] = []

        def poll(node: Node) -> None:
            # As a worker's connection does: on and on, also after its server stopped.
            while not done.wait(0.005):
                try:
                    handed.extend(node.dequeue("mail", 1))
                except Exception as exc:
                    failures.append(f"{node.address}: {type(exc).__name__}: {exc}")

        pollers = [threading.Thread(target=poll, args=(n,), daemon=True) for n in (a, b, b)]
        for poller in pollers:
            poller.start()
        try:
            wait_until(lambda: len(handed) >= 10, "the first jobs handed out")
            b.stop()
            left_with = _claims_by(rt, "s2")
            rt.wait_serving("mail", PARTITIONS, [a])
            at_take_over = len(handed)
            # The pollers go on a while with `a` alone owning every partition.
            wait_until(
                lambda: len(handed) >= at_take_over + 30, f"more jobs handed out ({failures[:3]})"
            )
        finally:
            done.set()
            for poller in pollers:
                poller.join(10)
        assert at_take_over < len(jobs) - 30, "the jobs ran out before `a` took over"
        assert failures == []
        # b's pollers got jobs from `a` only (forwarded), once b had left the group.
        assert _claims_by(rt, "s2") == left_with

        rt.settle()
        handed.extend(a.dequeue("mail", len(jobs)))
        assert _twice(handed) == []
        assert sorted(handed) == sorted(jobs)


def test_a_server_stops_without_waiting_out_the_live_traces_pause() -> None:
    """The live-traces thread pauses up to a second between its passes; a stop waited for
    the pause to run out (a second more to every server's stop, and to every test on
    the fakes for each server it ran)."""
    with Runtime(CONFIG) as rt:
        node = rt.node()
        wait_until(node.owner.live_traces.thread.is_alive, "the thread to start")
        time.sleep(0.05)  # in its pause
        started = time.monotonic()
        node.stop()
        assert time.monotonic() - started < 0.5
        assert not node.owner.live_traces.thread.is_alive()
