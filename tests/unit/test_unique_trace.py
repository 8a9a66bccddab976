"""A unique job's history lists the enqueues its key turned away (issue 42 part 1,
decision 0037): each is a rejected step in the holder's timeline, with its caller and
the verdict, from the projection and from the log alike; the turned-away enqueue keeps
its own row, which tells its caller which job holds the key."""

from __future__ import annotations

import json
from typing import Any

from pinledger.ledger import descriptor
from pinledger.ledger.log import queue_topic
from pinledger.projections.log_history import read_history
from pinledger.service.testing.runtime import TEST_CONFIG, Runtime, job


def test_the_holders_history_shows_each_enqueue_its_key_turned_away() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        rt.wait_serving("mail", TEST_CONFIG.partitions, [node])
        [holder] = node.enqueue("mail", job(b"report", unique_key="report:7"))
        [again] = node.enqueue("mail", job(b"report, again", unique_key="report:7"))
        [plain] = node.enqueue("mail", job(b"no key"))
        assert again == holder
        rt.settle()

        history = node.history(holder)
        steps = [(s.action, s.applied, s.source) for s in history.steps]
        assert steps == [
            ("Enqueued", True, "worker:runtime-test"),
            ("Enqueued", False, "worker:runtime-test"),
        ]
        turned = history.steps[1]
        assert "key 'report:7' is held by job" in turned.reason
        assert json.loads(turned.detailJson)["unique_key"] == "report:7"
        assert history.steps[1].stateAfter == history.steps[0].stateAfter  # left as it was
        assert [s.action for s in node.history(plain).steps] == ["Enqueued"]

        # From the log (the history retention dropped the rows): the same rows.
        found = descriptor.parse(holder)
        topic = queue_topic(TEST_CONFIG.topic_prefix, "mail")
        from_log = read_history(rt.log, topic, found, 10_000).rows
        stored = rt.ledger_store.timeline("mail", found.partition, found.local_id)

        def seen(rows: Any) -> list[tuple[Any, ...]]:
            return [
                (r.offset, r.idx, r.type, r.applied, r.verdict, r.source, r.state_after, r.detail)
                for r in rows
            ]

        assert len(stored) == 2
        assert seen(from_log) == seen(stored)
