"""Each queue's jobs by state and the age of its oldest due job, as /metrics gauges
(service/ownership/maintenance/queue_gauges.py): the dashboard overview's numbers, read
by the catalog's owner alone, capped, and absent rather than stale when they cannot be
read."""

from __future__ import annotations

import dataclasses

from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.queue_gauges import QueueGauges
from pinledger.service.ownership.maintenance.scheduler import Lane
from pinledger.service.testing.runtime import TEST_CONFIG, Node, Runtime, job

JOBS = "pinledger_queue_jobs"
OLDEST = "pinledger_queue_oldest_ready_seconds"
CONFIG = dataclasses.replace(
    TEST_CONFIG, partitions=2, queue_metrics_interval_s=5.0, claim_timeout_s=600.0
)


def _jobs(metrics: Metrics, queue: str) -> dict[str, float | None]:
    states = ("pending", "later", "running", "succeeded", "failed")
    return {s: metrics.snapshot_gauge(JOBS, queue=queue, state=s) for s in states}


def _workload(rt: Runtime, node: Node) -> int:
    """Jobs of queue "mail" in every state; the run_after of its one due job."""
    node.create_queue("mail")
    now = rt.clock.now_ms()
    node.enqueue("mail", job(b"ok"), job(b"ok"), job(b"bad", attempts=1), job(b"busy"))
    node.enqueue("mail", job(b"later", run_after_ms=now + 3_600_000))
    rt.settle()
    taken = node.dequeue("mail", 10)
    assert sorted(taken.values()) == [b"bad", b"busy", b"ok", b"ok"]
    node.ack(
        "mail",
        succeeded=[d for d, body in taken.items() if body == b"ok"],
        failed=[d for d, body in taken.items() if body == b"bad"],
    )
    due = now - 10_000
    node.enqueue("mail", job(b"waiting", run_after_ms=due))
    rt.settle()
    return due


def test_the_catalogs_owner_exports_each_queues_jobs_by_state_and_oldest_due_age() -> None:
    with Runtime(CONFIG) as rt:
        a = rt.node()
        due = _workload(rt, a)
        rt.advance_until(lambda: _jobs(a.metrics, "mail")["pending"] is not None, "the gauges")
        rt.settle()
        rt.advance_until(
            lambda: _jobs(a.metrics, "mail")["succeeded"] == 2, "a refresh after the acks"
        )
        assert _jobs(a.metrics, "mail") == {
            "pending": 1,
            "later": 1,
            "running": 1,
            "succeeded": 2,
            "failed": 1,
        }
        # The dashboard's own numbers, as its overview reads them.
        tally = rt.store.queue_tally("mail", rt.clock.now_ms(), CONFIG.max_priority, 10_000)
        assert list(_jobs(a.metrics, "mail").values()) == [
            tally.pending_due,
            tally.pending_future,
            tally.running,
            tally.succeeded,
            tally.failed,
        ]
        waited = a.metrics.snapshot_gauge(OLDEST, queue="mail")
        assert waited is not None
        assert 10 <= waited <= (rt.clock.now_ms() - due) / 1000

        # Another server joins: only the catalog's owner exports them.
        b = rt.node()
        rt.settle()
        rt.clock.advance(CONFIG.queue_metrics_interval_s)
        rt.settle()

        def one_exports() -> bool:
            rt.clock.advance(1)
            exporting = [n for n in (a, b) if _jobs(n.metrics, "mail")["pending"] is not None]
            return len(exporting) == 1 and exporting[0].owner.partitions.catalog is not None

        rt.advance_until(one_exports, "one server exporting the queue gauges")


def test_a_queue_with_nothing_due_has_waited_zero() -> None:
    with Runtime(CONFIG) as rt:
        a = rt.node()
        a.create_queue("mail")
        a.enqueue("mail", job(b"later", run_after_ms=rt.clock.now_ms() + 3_600_000))
        rt.settle()
        rt.advance_until(lambda: a.metrics.snapshot_gauge(OLDEST, queue="mail") == 0, "zero")
        assert _jobs(a.metrics, "mail")["later"] == 1


def _store_with_jobs(rt: Runtime, count: int) -> None:
    a = rt.node()
    a.create_queue("mail")
    a.enqueue("mail", *[job(b"%d" % i) for i in range(count)])
    rt.settle()


def test_counts_stop_at_the_cap() -> None:
    with Runtime(CONFIG) as rt:
        _store_with_jobs(rt, 5)
        metrics = Metrics()
        QueueGauges(rt.store, metrics, rt.clock, 3, cap=3, every_s=5).run(rt.clock.now_ms())
        assert _jobs(metrics, "mail")["pending"] == 3


def test_a_server_that_stops_leading_drops_its_series_and_an_unread_queue_has_none() -> None:
    with Runtime(CONFIG) as rt:
        _store_with_jobs(rt, 2)
        metrics = Metrics()
        leads = [True]
        gauges = QueueGauges(rt.store, metrics, rt.clock, 3, cap=100, every_s=5)
        lane = Lane("queue-gauges", [gauges], rt.clock, lambda: leads[0], "t")

        def turn() -> None:
            rt.clock.advance(lane.until_next())
            lane.run_due()

        turn()
        assert _jobs(metrics, "mail")["pending"] == 2
        rt.store.fail("connection refused")
        try:
            turn()  # unknown: no series, never the last number read
        finally:
            rt.store.recover()
        assert JOBS not in metrics.prometheus() and OLDEST not in metrics.prometheus()
        turn()
        assert _jobs(metrics, "mail")["pending"] == 2
        leads[0] = False
        turn()
        assert JOBS not in metrics.prometheus() and OLDEST not in metrics.prometheus()


def test_the_setting_zero_turns_them_off() -> None:
    config = dataclasses.replace(CONFIG, queue_metrics_interval_s=0.0)
    with Runtime(config) as rt:
        a = rt.node()
        a.create_queue("mail")
        rt.settle()
        rt.clock.advance(60)
        rt.settle()
        assert JOBS not in a.metrics.prometheus()
        assert "queue-gauges" not in {d.name for d in a.owner.scheduler.duties}
