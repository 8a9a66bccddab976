"""The failover benchmark's figures from what its load recorded (bench/failover.py):
when the moved partitions served again, how long each stood still while it had work,
the hand-offs read from /metrics or the servers' logs, and when the owners' group
counts as settled."""

from __future__ import annotations

import math
from pathlib import Path

from pytest import approx

from bench.failover import (
    HANDOFFS,
    PARTITIONS,
    Stage,
    figures,
    first_answers,
    member,
    owning_lines,
    recovery,
    settled,
    stood_still,
    work_from,
)
from bench.failover_load import Answer, Enqueue
from bench.metrics_page import counter_sum
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess

FAULT = 100.0


def answer(started: float, ended: float, *partitions: int) -> Answer:
    return Answer(started, ended, frozenset(partitions))


def test_recovery_is_the_slowest_moved_partitions_first_answer_after_the_fault() -> None:
    answers = [
        answer(90.0, 90.1, 1, 2),  # before the fault
        answer(100.5, 100.6, 1),
        answer(101.0, 101.2, 1, 2),
        answer(102.0, 102.5, 2),  # partition 2 again: its first one counts
        answer(100.1, 100.2, 7),  # not a moved partition
    ]
    assert first_answers(answers, [1, 2], FAULT) == {1: approx(0.6), 2: approx(1.2)}
    assert recovery(answers, [1, 2], FAULT) == approx(1.2)


def test_an_answer_to_a_dequeue_started_before_the_fault_does_not_count() -> None:
    # Started before the signal, answered after it: the victim may have served it
    # on its way out; the partition has not been served again yet.
    answers = [answer(99.9, 100.3, 1), answer(100.2, 103.0, 1)]
    assert recovery(answers, [1], FAULT) == approx(3.0)


def test_no_recovery_while_a_moved_partition_has_not_served() -> None:
    answers = [answer(100.5, 100.6, 1), answer(101.0, 101.1, 3)]
    assert recovery(answers, [1, 2], FAULT) is None
    assert first_answers(answers, [1, 2], FAULT) == {1: approx(0.6)}


def enqueue(started: float, ended: float, partition: int, *jobs: str) -> Enqueue:
    return Enqueue(started, ended, partition, jobs)


def test_a_partition_stands_still_from_the_signal_when_it_had_a_job_pending() -> None:
    enqueues = [enqueue(99.0, 99.1, 1, "q:s1:p1:1", "q:s1:p1:2")]
    # Job 1 was taken before the fault; job 2 waits: the partition had work at the signal.
    answers = [
        Answer(99.2, 99.3, frozenset({1}), frozenset({"q:s1:p1:1"})),
        Answer(102.0, 102.5, frozenset({1}), frozenset({"q:s1:p1:2"})),
    ]
    assert work_from(enqueues, answers, [1], FAULT) == {1: FAULT}
    assert stood_still(enqueues, answers, [1], FAULT) == {1: approx(2.5)}


def test_a_drained_partition_is_not_charged_the_wait_for_its_next_job() -> None:
    enqueues = [
        enqueue(99.0, 99.1, 1, "q:s1:p1:1"),
        enqueue(99.5, 99.6, 2, "q:s2:p1:2"),  # another partition's
        enqueue(100.4, 100.45, 1, "q:s1:p1:3"),  # the next job of partition 1
        enqueue(100.8, 100.9, 1, "q:s1:p1:4"),
    ]
    answers = [
        Answer(99.2, 99.3, frozenset({1}), frozenset({"q:s1:p1:1"})),
        Answer(100.5, 100.6, frozenset({1}), frozenset({"q:s1:p1:3"})),
    ]
    assert work_from(enqueues, answers, [1], FAULT) == {1: 100.4}
    assert stood_still(enqueues, answers, [1], FAULT) == {1: approx(0.2)}
    # From the signal, the same answer came 0.6 s after it.
    assert first_answers(answers, [1], FAULT) == {1: approx(0.6)}


def test_an_enqueue_in_flight_at_the_signal_counts_from_the_signal() -> None:
    enqueues = [enqueue(99.9, 100.2, 1, "q:s1:p1:1")]
    answers = [Answer(100.3, 100.4, frozenset({1}), frozenset({"q:s1:p1:1"}))]
    assert work_from(enqueues, answers, [1], FAULT) == {1: FAULT}
    assert stood_still(enqueues, answers, [1], FAULT) == {1: approx(0.4)}


def test_a_partition_not_served_again_has_no_figure() -> None:
    enqueues = [enqueue(99.0, 99.1, 1, "q:s1:p1:1"), enqueue(99.0, 99.1, 2, "q:s2:p1:2")]
    answers = [Answer(101.0, 101.1, frozenset({2}), frozenset({"q:s2:p1:2"}))]
    assert stood_still(enqueues, answers, [1, 2], FAULT) == {2: approx(1.1)}


def test_handoffs_are_summed_over_the_series_of_the_counter() -> None:
    page = "\n".join(
        [
            "# HELP pinledger_partition_handoffs_total Partitions handed over.",
            "# TYPE pinledger_partition_handoffs_total counter",
            'pinledger_partition_handoffs_total{queue="a",reason="stop"} 3',
            'pinledger_partition_handoffs_total{queue="b",reason="join"} 2.0',
            'pinledger_partition_handoffs_totally{queue="a"} 40',
            'pinledger_jobs_total{queue="a",action="dequeue"} 100',
        ]
    )
    assert counter_sum(page, HANDOFFS) == 5.0
    assert counter_sum("pinledger_partition_handoffs_total 7\n", HANDOFFS) == 7.0
    assert counter_sum("# TYPE pinledger_rpc_total counter\n", HANDOFFS) == 0.0


def test_owning_lines_count_the_queues_topic_only() -> None:
    log = "\n".join(
        [
            "2026-11-28 14:00:00,000 INFO owning fo1.q.failover[3] from offset 0 (...)",
            "2026-11-28 14:00:00,001 INFO owning fo1.q.failover[11] from offset 9 (...)",
            "2026-11-28 14:00:00,002 INFO owning fo1.q.failover2[3] from offset 0 (...)",
            "2026-11-28 14:00:00,003 INFO serving fo1.q.failover[3]",
        ]
    )
    assert owning_lines(log, "fo1.q.failover") == 2


def test_the_group_is_settled_when_each_partition_has_one_live_owner() -> None:
    stage = Stage(Config(), {}, Path("."))
    stage.servers = [ServerProcess(prefix=stage.prefix, schema=stage.schema) for _ in range(3)]
    a, b, c = (member(s) for s in stage.servers)
    thirds = [frozenset(range(i, PARTITIONS, 3)) for i in range(3)]
    assert settled({a: thirds[0], b: thirds[1], c: thirds[2]}, stage)
    # A server with nothing yet (a rebalance under way), a partition missing or owned
    # twice, a dead member still in the group: not settled.
    assert not settled({a: thirds[0] | thirds[1], b: frozenset(), c: thirds[2]}, stage)
    assert not settled({a: thirds[0], b: thirds[1], c: thirds[2] - {2}}, stage)
    assert not settled({a: thirds[0] | {1}, b: thirds[1], c: thirds[2]}, stage)
    assert not settled(
        {a: thirds[0], b: thirds[1], c: thirds[2], "pinledger@127.0.0.1:1": frozenset()}, stage
    )


def test_a_runs_figures_charge_only_the_time_a_moved_partition_had_work() -> None:
    # Two moved partitions, served every 0.5 s until the fault at 100 s. Partition 1 had
    # a job pending at the signal; partition 2 had been drained and got its next job at
    # 104 s; both were served again at 105 s.
    enqueues: list[Enqueue] = []
    answers: list[Answer] = []
    for n, t in enumerate(x / 2 for x in range(190, 200)):
        for partition in (1, 2):
            job = f"q:s{partition}:p1:{n}"
            enqueues.append(enqueue(t, t + 0.01, partition, job))
            answers.append(Answer(t + 0.02, t + 0.05, frozenset({partition}), frozenset({job})))
    enqueues += [
        enqueue(99.9, 99.95, 1, "q:s1:p1:late"),
        enqueue(104.0, 104.01, 2, "q:s2:p1:next"),
    ]
    answers += [
        Answer(104.9, 105.0, frozenset({1, 2}), frozenset({"q:s1:p1:late", "q:s2:p1:next"}))
    ]
    seconds, first, before = figures(enqueues, answers, frozenset({1, 2}), FAULT)
    assert seconds == approx(5.0)  # partition 1's; partition 2 stood still 1 s
    assert first == {1: approx(5.0), 2: approx(5.0)}
    assert before == approx(0.05)  # with no fault, a job waited 50 ms

    drained = figures(enqueues, answers, frozenset({2}), FAULT)[0]
    assert drained == approx(1.0)
    unserved = figures(enqueues, answers[:-1], frozenset({1, 2}), FAULT)[0]
    assert unserved == math.inf
