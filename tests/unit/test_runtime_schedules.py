"""Periodic jobs through the servers on the fakes (decision 0038): each tick of a
schedule is enqueued once across the cluster, by the catalog's owner, recorded in the
ledger; a failover neither doubles nor skips a tick; a tick whose record was lost is
enqueued again as the same job; the queue config's changes hold from the next tick."""

from __future__ import annotations

import itertools
import json
from typing import Any

from pinledger.ledger import codec
from pinledger.ledger.events import Actor, ScheduleTicked
from pinledger.ledger.log import LogError, catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.service.observability import catalogue
from pinledger.service.queue_config import QueueConfig, parse_queue_config
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime

EVERY_S = 10


def _config(*schedules: dict[str, Any], queue: str = "mail") -> QueueConfig:
    doc = {"queues": [{"name": queue, "queueConfig": {"schedules": list(schedules)}}]}
    return parse_queue_config(json.dumps(doc))


PING = {"name": "ping", "everySeconds": EVERY_S, "body": "ping", "priority": 2, "attempts": 3}


def _ticks(rt: Runtime, schedule: str = "ping") -> list[ScheduleTicked]:
    """The catalog's records of the schedule's ticks, in log order."""
    topic = catalog_topic(TEST_CONFIG.topic_prefix)
    return [
        e
        for r in rt.log.records(topic, 0)
        for e in codec.decode(r.value).events
        if isinstance(e, ScheduleTicked) and e.schedule == schedule
    ]


def _ran(rt: Runtime, schedule: str = "ping") -> dict[int, set[str]]:
    """Tick -> the jobs recorded for it (a tick recorded twice: one job, twice)."""
    found: dict[int, set[str]] = {}
    for tick in _ticks(rt, schedule):
        if tick.job:
            found.setdefault(tick.tick_ms, set()).add(tick.job)
    return found


def _cluster(rt: Runtime, config: QueueConfig) -> tuple[Node, Node]:
    a, b = rt.node(), rt.node()
    a.create_queue("mail")
    rt.wait_serving("mail", TEST_CONFIG.partitions, [a, b])
    for node in (a, b):
        node.queue_config = config
    return a, b


def _holder(nodes: tuple[Node, ...]) -> Node:
    (holder,) = [n for n in nodes if n.live and n.owner.duties.leads()]
    return holder


def test_each_tick_is_enqueued_once_with_the_schedules_job() -> None:
    with Runtime() as rt:
        a, _ = _cluster(rt, _config(PING))
        rt.advance_until(lambda: len(_ran(rt)) >= 3, "three ticks", step_s=1.0)
        rt.settle()
        ran = _ran(rt)
        ticks = sorted(ran)
        assert all(len(jobs) == 1 for jobs in ran.values()), ran
        assert [later - earlier for earlier, later in itertools.pairwise(ticks)] == [
            EVERY_S * 1000
        ] * (len(ticks) - 1)
        assert all(t % (EVERY_S * 1000) == 0 for t in ticks)
        begin = _ticks(rt)[0]
        assert begin.job == "" and begin.tick_ms < ticks[0]  # where the schedule began
        assert ticks[0] - begin.tick_ms <= EVERY_S * 1000  # and its first tick after it
        jobs = [next(iter(ran[t])) for t in ticks]
        assert len(set(jobs)) == len(jobs)
        assert a.count("mail") == len(jobs)
        info = a.lookup(jobs[0])
        assert info.attemptsAllowed == 3
        assert ":p2:" in jobs[0]  # its priority
        assert info.uniqueKey == f"schedule:ping:{ticks[0]}"
        got = a.dequeue("mail", 100)
        assert set(got) >= set(jobs) and set(got.values()) == {b"ping"}
        last = rt.ledger_store.schedule_ticks("mail")
        assert [(t.schedule, t.tick_ms, t.job) for t in last] == [("ping", ticks[-1], jobs[-1])]


def test_a_failover_of_the_duty_neither_doubles_nor_skips_a_tick() -> None:
    with Runtime() as rt:
        nodes = _cluster(rt, _config(PING))
        rt.advance_until(lambda: len(_ran(rt)) >= 2, "two ticks", step_s=1.0)
        holder = _holder(nodes)
        before = len(_ran(rt))
        holder.stop()
        (other,) = [n for n in nodes if n is not holder]
        rt.advance_until(lambda: len(_ran(rt)) >= before + 3, "three more ticks", step_s=1.0)
        assert other.owner.duties.leads()
        rt.settle()
        ran = _ran(rt)
        ticks = sorted(ran)
        assert all(len(jobs) == 1 for jobs in ran.values()), ran
        assert ticks == list(range(ticks[0], ticks[-1] + 1, EVERY_S * 1000))
        assert other.count("mail") == len(ticks)


class _LosesOneRecord:
    """A writer whose first record of a tick with a job fails, as if the server died
    between the tick's enqueue and its record."""

    def __init__(self, writer: LedgerWriter) -> None:
        self.writer = writer
        self.lost: list[ScheduleTicked] = []

    def record_tick(self, tick: ScheduleTicked, at: int, actor: Actor) -> None:
        if tick.job and not self.lost:
            self.lost.append(tick)
            raise LogError("the broker went away")
        self.writer.record_tick(tick, at, actor)


def test_a_tick_enqueued_but_not_recorded_is_enqueued_again_as_the_same_job() -> None:
    with Runtime() as rt:
        nodes = _cluster(rt, _config(PING))
        writers = [_LosesOneRecord(n.writer) for n in nodes]
        for node, writer in zip(nodes, writers, strict=True):
            node.owner.duties.schedules.writer = writer  # type: ignore[assignment]
        rt.advance_until(lambda: len(_ran(rt)) >= 2, "two ticks", step_s=1.0)
        rt.settle()
        (lost,) = [t for w in writers for t in w.lost]
        ran = _ran(rt)
        assert ran[lost.tick_ms] == {lost.job}  # recorded later, with the job it made
        assert nodes[0].count("mail") == len(ran)


def test_the_queue_config_adds_changes_and_removes_schedules_from_the_next_tick() -> None:
    with Runtime() as rt:
        nodes = _cluster(rt, _config(PING))
        rt.advance_until(lambda: len(_ran(rt)) >= 1, "a tick", step_s=1.0)
        hourly = {"name": "hourly", "cron": "0 * * * *", "body": "report"}
        slower = {**PING, "everySeconds": 30}
        changed_at = rt.clock.now_ms()
        for node in nodes:
            node.queue_config = _config(slower, hourly)

        def since_the_change() -> list[int]:
            return [t for t in sorted(_ran(rt)) if t > changed_at]

        rt.advance_until(lambda: len(since_the_change()) >= 3, "three ticks", step_s=1.0)
        assert {b - a for a, b in itertools.pairwise(since_the_change())} == {30_000}
        rt.advance_until(lambda: len(_ran(rt, "hourly")) >= 1, "an hourly tick", step_s=5.0)
        for node in nodes:
            node.queue_config = _config(hourly)
        rt.settle()
        stopped = len(_ran(rt))
        rt.clock.advance(60)
        rt.settle()
        assert len(_ran(rt)) == stopped  # removed: no tick since
        recorded = rt.ledger_store.schedule_ticks("mail")
        (when,) = [t.tick_ms for t in recorded if t.schedule == "hourly"]
        assert when % 3_600_000 == 0


def test_a_schedule_made_faster_begins_from_the_change_with_no_tick_counted_missed() -> None:
    with Runtime() as rt:
        minutely = {**PING, "everySeconds": 60}
        nodes = _cluster(rt, _config(minutely))
        rt.advance_until(lambda: len(_ran(rt)) >= 1, "a tick", step_s=1.0)
        rt.clock.advance(30)  # half way to the next minute
        changed_at = rt.clock.now_ms()
        for node in nodes:
            node.queue_config = _config({**PING, "everySeconds": 5})
        rt.advance_until(
            lambda: any(t > changed_at for t in _ran(rt)), "a tick of the new timing", step_s=1.0
        )
        first = min(t for t in _ran(rt) if t > changed_at)
        assert first - changed_at <= 5_000  # the first tick after the change, not a catch-up
        missed = catalogue.SCHEDULE_TICKS_MISSED
        counted = [n.metrics.snapshot_counter(missed, queue="mail", schedule="ping") for n in nodes]
        assert counted == [0, 0]  # the 5 s ticks of the old minute were never due


def test_schedules_of_a_queue_that_does_not_exist_run_nothing_and_break_nothing() -> None:
    with Runtime() as rt:
        nodes = _cluster(rt, _config(PING, queue="nowhere"))
        rt.clock.advance(3 * EVERY_S)
        rt.settle()
        assert _ticks(rt) == []
        health = _holder(nodes).owner.scheduler.lane("schedules").health["schedules"]
        assert health.failure is None and health.ran_at is not None
