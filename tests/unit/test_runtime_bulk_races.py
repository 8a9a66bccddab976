"""Bulk actions racing the jobs they selected, on the fakes: deleteJobs selects jobs in
Postgres, then appends their deletes, and a retry, a claim or an ack may land in
between. A delete names the state it was selected in (ledger format 3), so it never
removes a job that has moved on since."""

from __future__ import annotations

from typing import Any

from pinledger.idl import pinlater
from pinledger.ledger import formats
from pinledger.ledger.descriptor import parse
from pinledger.ledger.events import Actor, Retried
from pinledger.projections.store import JobFilter, JobRow
from pinledger.service.testing.runtime import CALLER, Runtime, job

State = pinlater.PinLaterJobState
OPERATOR = Actor(source="ops:laptop", server="s0")


def test_delete_jobs_of_failed_jobs_spares_one_retried_after_it_was_selected() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        [descriptor] = node.enqueue("mail", job(b"x", attempts=1))
        rt.settle()
        assert list(node.dequeue("mail", 1)) == [descriptor]
        node.ack("mail", failed=[descriptor])
        rt.settle()
        assert node.lookup(descriptor).jobState == State.FAILED
        assert node.owner.writer.cluster_format >= formats.GUARDED_DELETES

        found = parse(descriptor)
        select = rt.store.select

        def select_then_retry(where: JobFilter, limit: int) -> list[JobRow]:
            rows = select(where, limit)
            # An operator's retry lands between deleteJobs' selection and its delete.
            now = rt.clock.now_ms()
            retry = Retried(found.local_id, attempts_allowed=1, run_after=now)
            rt.writer.append("mail", found.partition, [retry], now, OPERATOR)
            return rows

        rt.store.select = select_then_retry  # type: ignore[method-assign]
        request = pinlater.PinLaterDeleteJobsRequest(queueName="mail", jobState=State.FAILED)
        deleted: Any = rt.call_waiting(lambda: node.handler.deleteJobs(CALLER, request))
        assert deleted == 1  # appended: one delete, of the job as it was selected
        rt.store.select = select  # type: ignore[method-assign]
        rt.settle()
        # The retried job is PENDING and still there; its history says why.
        assert node.lookup(descriptor).jobState == State.PENDING
        last = node.history(descriptor).steps[-1]
        assert (last.action, last.applied) == ("Deleted", False)
        assert last.reason == "delete: job is PENDING, not FAILED as selected"
