"""Every PinLater method over a real socket against a real server, Kafka and Postgres:
the behaviour lines of PINLATER_CONTRACT.md, one test (or a few) each. The whole module
runs three times: on a server projecting into Postgres, on one projecting into MySQL
(MariaDB, PINLEDGER_STORE_DSN=mysql://...), and on one reaching Kafka through the
librdkafka adapter (PINLEDGER_KAFKA_CLIENT=librdkafka, on Postgres)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger import descriptor
from pinledger.ledger.kafka import KafkaLog
from pinledger.projections.dsn import is_mysql
from pinledger.projections.factory import open_store
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.testing.servers import (
    ServerProcess,
    context,
    dequeue_until,
    running,
    wait_for,
)
from tests.contract.store_fixtures import store_dsn
from tests.integration.conftest import ADMIN_PASSWORD, server_settings

pytestmark = pytest.mark.integration

PENDING, IN_PROGRESS, SUCCEEDED, FAILED = 0, 1, 2, 3


def now_ms() -> int:
    return int(time.time() * 1000)


def enqueue(client: Any, queue: str, *jobs: Any) -> list[str]:
    answer = client.enqueueJobs(
        context(), p.PinLaterEnqueueRequest(queueName=queue, jobs=list(jobs))
    )
    return list(answer.jobDescriptors)


def job(body: bytes = b"x", **fields: Any) -> Any:
    return p.PinLaterJob(body=body, **fields)


def lookup(client: Any, *descriptors: str, body: bool = False) -> dict[str, Any]:
    request = p.PinLaterLookupJobRequest(jobDescriptors=list(descriptors), includeBody=body)
    return dict(client.lookupJobs(context(), request))


def ack(
    client: Any,
    queue: str,
    ok: Sequence[str] = (),
    failed: Sequence[str] = (),
    source: str = "tests:host",
    **info: Any,
) -> None:
    client.ackDequeuedJobs(
        context(source),
        p.PinLaterJobAckRequest(
            queueName=queue,
            jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=d, **info) for d in ok],
            jobsFailed=[p.PinLaterJobAckInfo(jobDescriptor=d, **info) for d in failed],
        ),
    )


def count(client: Any, queue: str, state: int, **fields: Any) -> int:
    request = p.PinLaterGetJobCountRequest(queueName=queue, jobState=state, **fields)
    return int(client.getJobCount(context(), request))


def error_of(call: Any) -> Any:
    with pytest.raises(p.PinLaterException) as caught:
        call()
    return caught.value


# (store kind, Kafka client) of each run.
RUNS = {
    "postgres": ("postgres", "librdkafka"),
    "mysql": ("mysql", "librdkafka"),
    "kafka-python": ("postgres", "kafka-python"),
}


@pytest.fixture(scope="module", params=list(RUNS))
def server(
    request: pytest.FixtureRequest, kafka: KafkaLog, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """This module's server (overriding the session's): one per run, on its own topic
    prefix and schema (a MariaDB database on MySQL)."""
    kind, kafka_client = RUNS[request.param]
    dsn = store_dsn(kind)
    tag = uuid.uuid4().hex[:10]
    schema = f"api_{tag}"
    try:
        open_store(dsn, schema).close()
    except StoreError as exc:
        pytest.fail(f"{exc}\n(the {request.param} run needs the real server: `make stack-up`)")
    settings = server_settings(PINLEDGER_STORE_DSN=dsn, PINLEDGER_KAFKA_CLIENT=kafka_client)
    process = ServerProcess(prefix=f"api{tag}.", schema=schema, settings=settings)
    with running([process], tmp_path_factory.mktemp(f"server-{request.param}")):
        yield process
    for topic in kafka.topics():
        if topic.startswith(process.prefix):
            kafka.delete_topic(topic)
    open_store(dsn, schema).drop()


@pytest.fixture
def ledger_store(server: ServerProcess) -> Iterator[LedgerStore]:
    store = open_store(server.settings["PINLEDGER_STORE_DSN"], server.schema)
    yield store
    store.close()


def test_ready_names_the_store_it_checks_by_its_kind(server: ServerProcess) -> None:
    with server.admin_get("/ready") as answer:
        checks = json.loads(answer.read())["checks"]
    kind = "mysql" if is_mysql(server.settings["PINLEDGER_STORE_DSN"]) else "postgres"
    assert checks[kind] == "ok" and checks["kafka"] == "ok", checks


# -- queues --------------------------------------------------------------------------


def test_queue_lifecycle_is_idempotent_and_password_protected(client: Any) -> None:
    name = f"life_{uuid.uuid4().hex[:8]}"
    client.createQueue(context(), name)
    client.createQueue(context(), name)  # idempotent
    assert name in client.getQueueNames(context())

    assert error_of(lambda: client.deleteQueue(context(), name, "wrong")).errorCode == (
        p.ErrorCode.PASSWORD_INVALID
    )
    assert name in client.getQueueNames(context())

    client.deleteQueue(context(), name, ADMIN_PASSWORD)
    assert name not in client.getQueueNames(context())
    client.deleteQueue(context(), name, ADMIN_PASSWORD)  # idempotent
    err = error_of(lambda: enqueue(client, name, job()))
    assert err.errorCode == p.ErrorCode.QUEUE_NOT_FOUND


def test_queue_names_are_checked(client: Any) -> None:
    for bad in ("has-dash", "sp ace", "", "ü"):
        assert error_of(lambda bad=bad: client.createQueue(context(), bad)).errorCode == (
            p.ErrorCode.QUEUE_NAME_INVALID
        )
    too_long = "q" * (descriptor.MAX_QUEUE_NAME_LENGTH + 1)
    assert error_of(lambda: client.createQueue(context(), too_long)).errorCode == (
        p.ErrorCode.QUEUE_NAME_TOO_LONG
    )
    assert too_long not in client.getQueueNames(context())


def test_every_queue_method_refuses_an_unknown_queue(client: Any) -> None:
    missing = "no_such_queue"
    calls = [
        lambda: enqueue(client, missing, job()),
        lambda: client.dequeueJobs(context(), p.PinLaterDequeueRequest(queueName=missing, limit=1)),
        lambda: ack(client, missing, ok=[f"{missing}:s0:p1:0"]),
        lambda: count(client, missing, PENDING),
        lambda: client.scanJobs(
            context(), p.PinLaterScanJobsRequest(queueName=missing, jobState=0)
        ),
        lambda: client.retryFailedJobs(
            context(), p.PinLaterRetryFailedJobsRequest(queueName=missing)
        ),
        lambda: client.deleteJobs(
            context(), p.PinLaterDeleteJobsRequest(queueName=missing, jobState=0)
        ),
        lambda: lookup(client, f"{missing}:s0:p1:0"),
    ]
    for call in calls:
        assert error_of(call).errorCode == p.ErrorCode.QUEUE_NOT_FOUND


# -- enqueue and lookup -----------------------------------------------------------------


def test_enqueue_answers_descriptors_in_order_and_lookup_reads_them_at_once(
    client: Any, queue: str
) -> None:
    before = now_ms()
    later = before + 3_600_000
    descriptors = enqueue(
        client,
        queue,
        job(b"first", priority=2, numAttemptsAllowed=5, customStatus="hello"),
        job(b"second", runAfterTimestampMillis=later),
    )
    parsed = [descriptor.parse(d) for d in descriptors]
    assert [d.queue for d in parsed] == [queue, queue]
    assert [d.priority for d in parsed] == [2, 1]
    # Read-your-writes: no sleep between the enqueue and the lookup.
    found = lookup(client, *descriptors, body=True)
    first, second = found[descriptors[0]], found[descriptors[1]]
    assert (first.jobState, first.attemptsAllowed, first.attemptsRemaining) == (PENDING, 5, 5)
    assert first.customStatus == "hello" and first.body == b"first"
    assert before <= first.createdAtTimestampMillis <= now_ms()
    assert before <= first.runAfterTimestampMillis <= now_ms()
    assert first.claimDescriptor is None
    assert second.runAfterTimestampMillis == later and second.attemptsAllowed == 2
    assert lookup(client, descriptors[0])[descriptors[0]].body is None  # no body unless asked


def test_lookup_leaves_out_jobs_that_do_not_exist(client: Any, queue: str) -> None:
    (real,) = enqueue(client, queue, job())
    ghost = f"{queue}:s0:p1:999999000"
    assert set(lookup(client, real, ghost)) == {real}


def test_bad_enqueues_are_refused_whole_and_lose_nothing(client: Any, queue: str) -> None:
    enqueue(client, queue, job())
    err = error_of(lambda: enqueue(client, queue, job(), job(priority=4)))
    assert err.errorCode == p.ErrorCode.PRIORITY_NOT_SUPPORTED
    assert error_of(lambda: enqueue(client, queue, job(priority=0))).errorCode == (
        p.ErrorCode.PRIORITY_NOT_SUPPORTED
    )
    big = b"x" * (512 * 1024 + 1)
    err = error_of(lambda: enqueue(client, queue, job(), job(big)))
    assert err.errorCode == p.ErrorCode.ENQUEUE_REJECTED and "524288" in err.message
    assert count(client, queue, PENDING) == 1


def test_an_enqueue_bigger_than_a_kafka_record_is_taken_whole(client: Any, queue: str) -> None:
    """300 jobs of 5,000-character statuses are 1.5 MB encoded, past the broker's record
    limit: the server cuts them into records the broker takes (issue 38), and appends
    go on afterwards."""
    big = [job(b"%d" % i, customStatus="s" * 5000) for i in range(300)]
    descriptors = enqueue(client, queue, *big)
    assert len(set(descriptors)) == 300
    found = lookup(client, descriptors[0], descriptors[-1], body=True)
    assert [found[d].body for d in (descriptors[0], descriptors[-1])] == [b"0", b"299"]
    assert {found[d].customStatus for d in found} == {"s" * 5000}
    assert enqueue(client, queue, job(b"after"))
    assert count(client, queue, PENDING) == 301


def test_malformed_descriptors_are_client_errors(client: Any, queue: str) -> None:
    for bad in ("garbage", f"{queue}:0:p1:1", f"{queue}:s0:p1:", f"{queue}:s99:p1:0"):
        err = error_of(lambda bad=bad: ack(client, queue, ok=[bad]))
        assert err.errorCode == p.ErrorCode.UNKNOWN and "descriptor" in err.message
    err = error_of(lambda: lookup(client, "nonsense"))
    assert "descriptor" in err.message
    enqueue(client, queue, job())  # the server still serves


# -- dequeue -----------------------------------------------------------------------------


def test_dequeue_serves_highest_priority_first_then_oldest(client: Any, queue: str) -> None:
    low = enqueue(client, queue, job(b"low", priority=3))
    mid = enqueue(client, queue, job(b"mid", priority=2))
    high = enqueue(client, queue, job(b"high", priority=1))
    # The three jobs live in three partitions: each can be dequeued once its owner has
    # projected it (milliseconds); priority orders the jobs that can be dequeued.
    dequeue_until(client, queue, 3, limit=3, dryRun=True)
    order = []
    for _ in range(3):
        got = dequeue_until(client, queue, 1, limit=1)
        order += list(got)
    assert order == high + mid + low


def test_dequeue_claims_and_acks_succeed(client: Any, queue: str) -> None:
    descriptors = enqueue(client, queue, *(job(f"j{i}".encode()) for i in range(5)))
    got = dequeue_until(client, queue, 5, limit=10)
    assert set(got) == set(descriptors)
    info = lookup(client, *descriptors)
    claims = {i.claimDescriptor for i in info.values()}
    assert all(i.jobState == IN_PROGRESS for i in info.values())
    assert len(claims) == 1 and None not in claims  # one claim per dequeue call
    assert all(i.attemptsRemaining == 2 for i in info.values())  # not used at claim time

    ack(client, queue, ok=descriptors, appendCustomStatus="done")
    info = lookup(client, *descriptors)
    assert {(i.jobState, i.customStatus) for i in info.values()} == {(SUCCEEDED, "done")}
    assert count(client, queue, SUCCEEDED) == 5


def test_dequeue_metadata_carries_attempts(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job(numAttemptsAllowed=4))
    answer = client.dequeueJobs(context(), p.PinLaterDequeueRequest(queueName=queue, limit=1))
    answer = answer if answer.jobs else None
    if answer is None:
        dequeue_until(client, queue, 1)
        return
    meta = answer.jobMetadata[d]
    assert (meta.attemptsAllowed, meta.attemptsRemaining) == (4, 4)


def test_delayed_jobs_wait_for_their_time(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job(runAfterTimestampMillis=now_ms() + 2500))
    assert count(client, queue, PENDING) == 0
    assert count(client, queue, PENDING, countFutureJobs=True) == 1
    wait_for(lambda: count(client, queue, PENDING) == 1, timeout=10)
    assert set(dequeue_until(client, queue, 1)) == {d}


def test_dry_run_shows_jobs_without_claiming(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job(b"peek"))
    peeked = dequeue_until(client, queue, 1, dryRun=True)
    assert peeked == {d: b"peek"}
    assert lookup(client, d)[d].jobState == PENDING
    assert set(dequeue_until(client, queue, 1)) == {d}


def test_failure_with_delay_retries_then_fails_on_the_last_attempt(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job(numAttemptsAllowed=2))
    dequeue_until(client, queue, 1)
    before = now_ms()
    ack(client, queue, failed=[d], retryDelayMillis=1500, appendCustomStatus="oops")
    info = lookup(client, d)[d]
    assert (info.jobState, info.attemptsRemaining, info.customStatus) == (PENDING, 1, "oops")
    assert info.runAfterTimestampMillis >= before + 1500
    assert info.claimDescriptor is None

    dequeue_until(client, queue, 1, timeout=15)
    ack(client, queue, failed=[d])
    info = lookup(client, d)[d]
    assert (info.jobState, info.attemptsRemaining) == (FAILED, 0)
    ack(client, queue, failed=[d])  # a failure ack for a job not in progress changes nothing
    assert lookup(client, d)[d].jobState == FAILED


def test_piggybacked_acks_are_applied(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job())
    dequeue_until(client, queue, 1)
    acks = p.PinLaterJobAckRequest(
        queueName=queue, jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=d)]
    )
    client.dequeueJobs(
        context(), p.PinLaterDequeueRequest(queueName=queue, limit=1, jobAckRequest=acks)
    )
    assert lookup(client, d)[d].jobState == SUCCEEDED


def test_stale_ack_is_rejected_and_recorded_in_the_history(
    client: Any, queue: str, ledger_store: LedgerStore
) -> None:
    (d,) = enqueue(client, queue, job())
    dequeue_until(client, queue, 1, source="worker:a")
    ack(client, queue, ok=[d], source="worker:b")  # not the claimant
    assert lookup(client, d)[d].jobState == IN_PROGRESS
    ack(client, queue, ok=[d], source="worker:a")
    assert lookup(client, d)[d].jobState == SUCCEEDED

    parsed = descriptor.parse(d)
    timeline = ledger_store.timeline(queue, parsed.partition, parsed.local_id)
    steps = [(row[2], row[4], row[8]) for row in timeline]  # type (codec tag), source, applied
    assert steps == [
        ("enq", "tests:host", True),
        ("clm", "worker:a", True),
        ("ok", "worker:b", False),
        ("ok", "worker:a", True),
    ]
    assert "rejected" in timeline[2][9]


# -- checkpoints -------------------------------------------------------------------------


def checkpoint(client: Any, queue: str, source: str = "tests:host", **fields: Any) -> None:
    client.checkpointJobs(
        context(source),
        p.PinLaterCheckpointJobsRequest(
            queueName=queue, requests=[p.PinLaterCheckpointJobRequest(**fields)]
        ),
    )


def test_checkpoint_heartbeat_replaces_body_resets_attempts_and_prepends_status(
    client: Any, queue: str
) -> None:
    (d,) = enqueue(client, queue, job(b"v1", customStatus="tail"))
    dequeue_until(client, queue, 1)
    claim = lookup(client, d)[d].claimDescriptor
    checkpoint(
        client,
        queue,
        jobDescriptor=d,
        newBody="v2",
        numOfAttemptsAllowed=7,
        prependCustomStatus="head;",
    )
    info = lookup(client, d, body=True)[d]
    assert (info.jobState, info.body, info.attemptsAllowed, info.attemptsRemaining) == (
        IN_PROGRESS,
        b"v2",
        7,
        7,
    )
    assert info.customStatus.startswith("head;") and info.claimDescriptor == claim


def test_checkpoint_move_to_pending_requeues_at_the_given_time(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job())
    dequeue_until(client, queue, 1)
    when = now_ms() + 1000
    checkpoint(client, queue, jobDescriptor=d, moveToPending=True, runAfterTimestampMillis=when)
    info = lookup(client, d)[d]
    assert (info.jobState, info.runAfterTimestampMillis, info.claimDescriptor) == (
        PENDING,
        when,
        None,
    )
    assert set(dequeue_until(client, queue, 1, timeout=10)) == {d}  # the next run of a cron job


def test_checkpoint_from_a_stale_claim_changes_nothing(client: Any, queue: str) -> None:
    (d,) = enqueue(client, queue, job(b"mine"))
    dequeue_until(client, queue, 1, source="worker:a")
    checkpoint(
        client, queue, source="worker:b", jobDescriptor=d, newBody="theirs", moveToPending=True
    )
    info = lookup(client, d, body=True)[d]
    assert (info.jobState, info.body) == (IN_PROGRESS, b"mine")


# -- counts, scans, bulk actions ----------------------------------------------------------


def test_counts_by_state_priority_and_regex(client: Any, queue: str) -> None:
    enqueue(client, queue, job(b"apple pie", priority=1), job(b"apple tart", priority=2))
    enqueue(client, queue, job(b"banana", priority=2))
    assert count(client, queue, PENDING) == 3
    assert count(client, queue, PENDING, priority=2) == 2
    assert count(client, queue, PENDING, bodyRegexToMatch="^apple") == 2
    assert count(client, queue, PENDING, priority=2, bodyRegexToMatch="an+a") == 1
    assert count(client, queue, SUCCEEDED) == 0
    err = error_of(lambda: count(client, queue, PENDING, bodyRegexToMatch="(unclosed"))
    assert err.errorCode == p.ErrorCode.UNKNOWN and "regex" in err.message
    err = error_of(lambda: count(client, queue, PENDING, priority=9))
    assert err.errorCode == p.ErrorCode.PRIORITY_NOT_SUPPORTED


def test_scan_pages_through_every_job_newest_first(client: Any, queue: str) -> None:
    base = now_ms() - 100_000
    descriptors = enqueue(
        client, queue, *(job(runAfterTimestampMillis=base + i * 10) for i in range(25))
    )
    seen: list[Any] = []
    token = "0"
    pages = 0
    while True:
        answer = client.scanJobs(
            context(),
            p.PinLaterScanJobsRequest(
                queueName=queue, jobState=PENDING, limit=10, continuation=token
            ),
        )
        seen += answer.scannedJobs
        pages += 1
        token = answer.continuation
        if token == "-1":
            break
    assert pages == 3
    assert [j.jobDescriptor for j in seen] == list(reversed(descriptors))
    assert all(j.body is None for j in seen)
    first = client.scanJobs(context(), p.PinLaterScanJobsRequest(queueName=queue, jobState=PENDING))
    assert len(first.scannedJobs) == 25 and first.continuation == "-1"  # default limit 100


def test_scan_refuses_a_continuation_it_did_not_issue(client: Any, queue: str) -> None:
    err = error_of(
        lambda: client.scanJobs(
            context(),
            p.PinLaterScanJobsRequest(queueName=queue, jobState=PENDING, continuation="bogus"),
        )
    )
    assert err.errorCode == p.ErrorCode.CONTINUATION_INVALID


def _fail_all(client: Any, queue: str, descriptors: list[str]) -> None:
    dequeue_until(client, queue, len(descriptors))
    ack(client, queue, failed=descriptors)


def test_retry_failed_jobs_brings_them_back_with_new_attempts(client: Any, queue: str) -> None:
    descriptors = enqueue(client, queue, *(job(numAttemptsAllowed=1) for _ in range(4)))
    _fail_all(client, queue, descriptors)
    assert count(client, queue, FAILED) == 4
    retry = p.PinLaterRetryFailedJobsRequest(queueName=queue, attemptsToAllow=3, limit=3)
    assert client.retryFailedJobs(context(), retry) == 3
    assert count(client, queue, FAILED) == 1
    pending = [i for i in lookup(client, *descriptors).values() if i.jobState == PENDING]
    assert len(pending) == 3 and {(i.attemptsAllowed, i.attemptsRemaining) for i in pending} == {
        (3, 3)
    }
    other = p.PinLaterRetryFailedJobsRequest(queueName=queue, priority=2)
    assert client.retryFailedJobs(context(), other) == 0  # only the priority asked for


def test_delete_jobs_by_state_priority_and_regex(client: Any, queue: str) -> None:
    keep = enqueue(client, queue, job(b"keep me"), job(b"drop me", priority=2))
    enqueue(client, queue, job(b"drop me"), job(b"drop me too"))
    request = p.PinLaterDeleteJobsRequest(
        queueName=queue, jobState=PENDING, bodyRegexToMatch="^drop"
    )
    assert client.deleteJobs(context(), request) == 2  # priority 1 by default
    assert set(lookup(client, *keep)) == set(keep)
    assert count(client, queue, PENDING) == 2
    limited = p.PinLaterDeleteJobsRequest(queueName=queue, jobState=PENDING, priority=2, limit=0)
    assert client.deleteJobs(context(), limited) == 0
    err = error_of(
        lambda: client.deleteJobs(
            context(), p.PinLaterDeleteJobsRequest(queueName=queue, jobState=PENDING, limit=-1)
        )
    )
    assert "negative" in err.message


def test_negative_dequeue_limit_is_refused(client: Any, queue: str) -> None:
    err = error_of(
        lambda: client.dequeueJobs(context(), p.PinLaterDequeueRequest(queueName=queue, limit=-5))
    )
    assert "negative" in err.message


def test_a_queue_is_usable_as_soon_as_create_queue_returns(client: Any) -> None:
    """createQueue answers once the queue's partitions have serving owners: a job
    enqueued right after it is seen by a lookup and handed to a dequeue, no retrying."""
    for _ in range(3):
        name = f"fresh_{uuid.uuid4().hex[:10]}"
        client.createQueue(context(), name)
        job = p.PinLaterJob(body=b"first")
        enqueued = client.enqueueJobs(context(), p.PinLaterEnqueueRequest(name, [job]))
        [d] = enqueued.jobDescriptors
        found = client.lookupJobs(context(), p.PinLaterLookupJobRequest([d]))
        assert d in found, f"{d} not visible right after createQueue + enqueue"
        got = client.dequeueJobs(context(), p.PinLaterDequeueRequest(queueName=name, limit=1))
        assert list(got.jobs) == [d]
