"""`pinledger demo`: a short tour of the ledger on the local Kafka and Postgres.

It creates a queue, appends enqueues, claims and acks (some failing, some stale) as
records, projects them into Postgres, prints counts and one job's timeline, then
replays the log into a scratch schema and shows that it equals the live tables.
"""

from __future__ import annotations

import random
import time
import uuid

from ledger.commands import Limits, NewJob, decide_enqueue, decide_failure, decide_success
from ledger.events import Actor, Claimed
from ledger.kafka_log import KafkaLog, KafkaSettings
from ledger.writer import LedgerWriter
from projections.projector import ProjectionRunner, Scope
from projections.replay import replay
from projections.store import Store
from service.config import Config

QUEUE = "demo"
PARTITIONS = 3
JOBS = 3000


def _now() -> int:
    return time.time_ns() // 1_000_000


def run_demo(config: Config) -> int:
    rng = random.Random(7)
    kafka = KafkaLog(KafkaSettings(bootstrap=config.kafka, client_id=config.server_id))
    store = Store(config.pg_dsn, config.schema)
    store.migrate()
    writer = LedgerWriter(kafka, config.topic_prefix)
    server = Actor(source="demo:localhost", request_id="", server=config.server_id)
    print(f"1. queue {QUEUE!r} with {PARTITIONS} partitions on Kafka {config.kafka}")
    if writer.topic(QUEUE) in kafka.topics():
        writer.delete_queue(QUEUE, _now(), server)
    writer.create_queue(QUEUE, PARTITIONS, _now(), server)

    print(f"2. enqueue {JOBS} jobs (priorities 1-3, some delayed) as ledger records")
    started = time.monotonic()
    descriptors = []
    for partition in range(PARTITIONS):
        jobs = [
            NewJob(
                body=f"job {partition}-{i}".encode(),
                priority=rng.randint(1, 3),
                run_after=_now() + (60_000 if i % 10 == 0 else 0),
            )
            for i in range(JOBS // PARTITIONS)
        ]
        events = decide_enqueue(jobs, _now(), Limits())
        descriptors += writer.enqueue(QUEUE, partition, events, _now(), server)
    print(
        f"   {len(descriptors)} descriptors in {time.monotonic() - started:.2f}s, "
        f"e.g. {descriptors[0]}"
    )

    print("3. workers claim 600 jobs; 500 succeed, 100 fail once; one stale ack")
    worker = Actor(source="worker:host1", request_id="r1", server=config.server_id)
    claimed = [d for d in descriptors if d.local_id % 10 != 0][:600]
    for partition in range(PARTITIONS):
        mine = [d for d in claimed if d.partition == partition]
        claim = f"{config.server_id}:{uuid.uuid4().hex[:8]}"
        writer.append(QUEUE, partition, [Claimed(d.local_id, claim) for d in mine], _now(), worker)
        acks = [
            decide_success(d.local_id, " done")
            if i % 6
            else decide_failure(d.local_id, 5_000, " boom")
            for i, d in enumerate(mine)
        ]
        writer.append(QUEUE, partition, acks, _now(), worker)
    stale = claimed[1]
    other = Actor(source="worker:host2", request_id="r9", server=config.server_id)
    writer.append(
        QUEUE, stale.partition, [decide_failure(stale.local_id, 0, " late")], _now(), other
    )

    print("4. project the log into Postgres")
    runner = ProjectionRunner(store, kafka, config.topic_prefix, Scope(frozenset({QUEUE})))
    projected = runner.catch_up()
    runner.close()
    print(f"   {projected} job events projected; jobs by state and priority:")
    for queue, state, priority, count in store.job_counts():
        if queue == QUEUE:
            print(f"     {state.name:<12} p{priority}  {count:>6}")

    print(f"5. the timeline of {stale}:")
    for row in store.timeline(stale.queue, stale.partition, stale.local_id):
        offset, idx, kind, _at, source, _request, _server, _claim, _ok, verdict, *_ = row
        print(f"     @{offset}.{idx} {kind:<10} by {source:<14} {verdict}")

    print("6. replay the queue's log into a scratch schema and compare")
    scratch = Store(config.pg_dsn, f"demo_replay_{uuid.uuid4().hex[:6]}")
    report = replay(store, scratch, kafka, config.topic_prefix, Scope(frozenset({QUEUE})))
    scratch.drop()
    print(
        f"   replayed {report.events} events in {report.seconds:.2f}s: "
        + ("identical to the live tables" if report.identical else "DIFFERENT")
    )
    kafka.close()
    store.close()
    print("\nNext: `pinledger replay` rebuilds every queue; `make test` runs the tests.")
    return 0 if report.identical else 1
