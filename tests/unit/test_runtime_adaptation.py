"""Partitions that adapt to each queue, on the fakes (issue 24, part 3): a queue whose
config gives bounds grows under enqueue load and shrinks when most dequeue answers are
empty, each change a catalog record with the policy's reason, never within the cooldown,
never for a queue without bounds; what each server measures shows in its metrics."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pinledger.ledger import codec, formats
from pinledger.ledger.events import QueueResized
from pinledger.ledger.log import catalog_topic
from pinledger.projections.store import QueueRow
from pinledger.service.partition_policy import Bounds, Thresholds
from pinledger.service.queue_config import (
    Adaptive,
    QueueConfig,
    QueueConfigError,
    QueueSettings,
    parse_queue_config,
)
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

CONFIG = dataclasses.replace(TEST_CONFIG, partitions=2)


def _adaptive(name: str = "mail", **partitions: Any) -> QueueConfig:
    bounds = {"min": 1, "max": 8, "windowSeconds": 10, "cooldownSeconds": 60, **partitions}
    return parse_queue_config(
        json.dumps({"queues": [{"name": name, "queueConfig": {"partitions": bounds}}]})
    )


def _resizes(rt: Runtime) -> list[QueueResized]:
    return [
        e
        for r in rt.log.records(catalog_topic(CONFIG.topic_prefix), 0)
        for e in codec.decode(r.value).events
        if isinstance(e, QueueResized)
    ]


def _open(rt: Runtime, name: str = "mail") -> int:
    return {q.name: q for q in rt.store.queues()}[name].open


def _node(rt: Runtime, config: QueueConfig) -> Node:
    rt.writer.follow_format(formats.LATEST)
    node = rt.node()
    node.writer.follow_format(formats.LATEST)
    node.queue_config = config
    return node


def test_a_queue_grows_under_enqueue_load_and_not_again_within_the_cooldown() -> None:
    with Runtime(CONFIG) as rt:
        a = _node(rt, _adaptive(growRate=5, cooldownSeconds=20))
        a.create_queue("mail")
        assert _open(rt) == 2  # the server's default, within the bounds

        def busy() -> bool:
            # 10 jobs each half second: 10 per second per partition, twice the threshold.
            a.enqueue("mail", *[job(b"%d" % n) for n in range(10)])
            return _open(rt) == 4

        rt.advance_until(busy, "the queue to grow to four", step_s=0.5)
        (grown,) = _resizes(rt)
        assert grown.partitions == 4
        assert grown.reason.startswith("adaptive: ")
        assert "per partition over 2 partitions, above 5" in grown.reason

        grown_at = rt.clock.now_ms()
        for _ in range(30):  # busier: within the 20 s cooldown, nothing changes
            a.enqueue("mail", *[job(b"%d" % n) for n in range(40)])
            rt.clock.advance(0.5)
        rt.settle()
        assert len(_resizes(rt)) == 1

        def busier() -> bool:
            a.enqueue("mail", *[job(b"%d" % n) for n in range(40)])
            return _open(rt) == 8

        rt.advance_until(busier, "the queue to grow again after the cooldown", step_s=0.5)
        assert [r.partitions for r in _resizes(rt)] == [4, 8]
        assert rt.clock.now_ms() - grown_at >= 20_000
        rt.advance_until(
            lambda: (
                a.metrics.snapshot_gauge(
                    "pinledger_queue_partitions", queue="mail", state="serving"
                )
                == 8
            ),
            "the metrics to show eight serving partitions",
        )


def test_a_queue_shrinks_when_most_dequeue_answers_are_empty() -> None:
    with Runtime(dataclasses.replace(CONFIG, partitions=4)) as rt:
        a = _node(rt, _adaptive(minDequeues=5))
        a.create_queue("mail")
        assert _open(rt) == 4

        def idle_worker() -> bool:
            assert a.dequeue("mail", 10) == {}
            return _open(rt) == 2

        rt.advance_until(idle_worker, "the queue to shrink to two", step_s=0.5)
        (shrunk,) = _resizes(rt)
        assert shrunk.partitions == 2
        assert "dequeue calls came back empty" in shrunk.reason
        assert a.metrics.snapshot_gauge("pinledger_queue_empty_dequeue_ratio", queue="mail") == 1
        assert (
            a.metrics.snapshot_counter(
                "pinledger_dequeue_calls_total", queue="mail", answer="empty"
            )
            >= 5
        )
        assert (
            a.metrics.snapshot_gauge("pinledger_queue_partitions", queue="mail", state="draining")
            == 2
        )


def test_a_queue_without_bounds_never_adapts() -> None:
    with Runtime(CONFIG) as rt:
        a = _node(rt, _adaptive("other", growRate=1, minDequeues=1))
        a.create_queue("mail")
        for i in range(20):
            a.enqueue("mail", *[job(b"%d-%d" % (i, n)) for n in range(10)])
        for _ in range(30):
            a.dequeue("mail", 1)
            rt.clock.advance(1)
        rt.settle()
        assert _resizes(rt) == []


def test_a_count_outside_new_bounds_is_brought_back_at_once() -> None:
    with Runtime(dataclasses.replace(CONFIG, partitions=4)) as rt:
        a = _node(rt, QueueConfig())
        a.create_queue("mail")
        a.queue_config = _adaptive(min=1, max=3)  # the operator edits the config
        rt.advance_until(lambda: _open(rt) == 3, "the queue to shrink to its maximum")
        assert _resizes(rt)[0].reason == "adaptive: above the maximum of 3"


def test_only_the_catalogs_owner_appends_a_change() -> None:
    with Runtime(CONFIG) as rt:
        a = _node(rt, _adaptive(growRate=5))
        b = _node(rt, _adaptive(growRate=5))
        a.create_queue("mail")

        def busy() -> bool:
            b.enqueue("mail", *[job(b"%d" % n) for n in range(10)])
            return _open(rt) == 4

        rt.advance_until(busy, "the queue to grow to four", step_s=0.5)
        rt.clock.advance(12)
        rt.settle()
        assert [r.partitions for r in _resizes(rt)] == [4]


@pytest.mark.parametrize(
    ("partitions", "expected"),
    [
        (
            {"min": 2, "max": 16},
            Adaptive(Bounds(2, 16)),
        ),
        (
            {
                "min": 1,
                "max": 4,
                "growRate": 50,
                "growBacklog": 10,
                "shrinkEmptyRatio": 0.9,
                "minDequeues": 3,
                "cooldownSeconds": 0,
                "windowSeconds": 5,
            },
            Adaptive(Bounds(1, 4), Thresholds(50, 10, 0.9, 3, 0), 5.0),
        ),
    ],
)
def test_adaptive_partitions_parse(partitions: dict[str, Any], expected: Adaptive) -> None:
    config = parse_queue_config(
        json.dumps({"queues": [{"name": "q", "queueConfig": {"partitions": partitions}}]})
    )
    settings = config.settings("q")
    assert settings.adaptive == expected
    assert settings.partitions is None


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ({"min": 0, "max": 4}, "needs integers 1 <= min <= max"),
        ({"min": 5, "max": 4}, "needs integers 1 <= min <= max"),
        ({"max": 4}, "needs integers 1 <= min <= max"),
        ({"min": 1, "max": 4, "grow": 3}, "unknown key 'grow'"),
        ({"min": 1, "max": 4, "growRate": 0}, "growRate must be a number > 0"),
        ({"min": 1, "max": 4, "growBacklog": 0.5}, "growBacklog must be an integer >= 1"),
        ({"min": 1, "max": 4, "shrinkEmptyRatio": 2}, "must be between 0 and 1"),
        ({"min": 1, "max": 4, "windowSeconds": 0}, "windowSeconds must be a number >= 1"),
        ("4", "partitions must be an integer >= 1 or an object"),
    ],
)
def test_bad_adaptive_partitions_are_refused_saying_what_is_wrong(
    partitions: object, message: str
) -> None:
    doc = {"queues": [{"name": "q", "queueConfig": {"partitions": partitions}}]}
    with pytest.raises(QueueConfigError, match=message):
        parse_queue_config(json.dumps(doc))


def test_a_new_adaptive_queue_starts_with_the_default_count_within_its_bounds() -> None:
    def settings(low: int, high: int) -> QueueSettings:
        return QueueSettings(adaptive=Adaptive(Bounds(low, high)))

    assert settings(1, 8).initial_partitions(4) == 4
    assert settings(6, 8).initial_partitions(4) == 6
    assert settings(1, 2).initial_partitions(4) == 2
    assert QueueSettings(partitions=3).initial_partitions(4) == 3
    assert QueueSettings().initial_partitions(4) == 4


def test_the_queue_rows_states_count_each_partition_once() -> None:
    row = QueueRow("q", 6, 0, open_partitions=2, retired_from=4)
    assert [row.state_of(p) for p in range(6)] == ["serving"] * 2 + ["draining"] * 2 + [
        "retired"
    ] * 2
