"""`python -m bench.storage`: Postgres bytes per job in `jobs` and `job_events`.

N jobs of a 512 B body go through the projector (projections/projector.py, the code
an owner runs) into a fresh schema of the stack's Postgres, as the server writes them:
enqueue records of `--per-record` jobs, then one claim record and one success record
per batch, with the actor strings and trace context of a real call. It prints the
bytes of each table (with indexes and TOAST, summed over job_events' partitions) per
job after the enqueue and after the ack, right after writing and after a VACUUM (what
autovacuum reclaims of the updated rows' old versions). The schema is dropped at the
end. No Kafka: the records are decoded from memory exactly as from the log.

    python -m bench.storage [--jobs 20000] [--per-record 10]
"""

from __future__ import annotations

import argparse
import uuid

from psycopg import sql

from pinledger.ledger import codec
from pinledger.ledger.descriptor import local_id_for
from pinledger.ledger.events import Actor, Claimed, Enqueued, Envelope, Event, Succeeded
from pinledger.ledger.log import LogRecord
from pinledger.projections.pg.sql import query
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import PartitionProjector
from pinledger.service.config import Config

BODY = b"x" * 512
TOPIC = "bench.q.storage"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
T0 = 1_700_000_000_000


def _actor(source: str) -> Actor:
    return Actor(source, uuid.uuid4().hex, "bench-host:12345")


class _Records:
    def __init__(self) -> None:
        self.records: list[LogRecord] = []

    def append(self, at: int, actor: Actor, events: list[Event]) -> int:
        offset = len(self.records)
        value = codec.encode(Envelope(at, actor, tuple(events)))
        self.records.append(LogRecord(TOPIC, 0, offset, value, codec.trace_headers(TRACEPARENT)))
        return offset


def _bytes(store: Store, table: str, vacuum: bool) -> int:
    with store.dialect.connection(f"measuring {table}") as conn:
        if vacuum:
            conn.autocommit = True
            try:
                conn.execute(query("vacuum_table").format(table=sql.Identifier(table)))
            finally:
                conn.autocommit = False
        row = conn.execute(query("relation_bytes"), {"table": table}).fetchone()
    return 0 if row is None else int(row[0])


def _report(store: Store, jobs: int, stage: str) -> None:
    for vacuum in (False, True):
        sizes = {t: _bytes(store, t, vacuum) / jobs for t in ("jobs", "job_events")}
        when = "after VACUUM" if vacuum else "as written"
        print(
            f"{stage:<22} {when:<13} jobs {sizes['jobs']:7.0f} B/job   "
            f"job_events {sizes['job_events']:7.0f} B/job"
        )


def measure(jobs: int, per_record: int) -> None:
    store = Store(Config.from_env().pg_dsn, f"bench_storage_{uuid.uuid4().hex[:8]}")
    try:
        store.migrate()
        log = _Records()
        projector = PartitionProjector(store, "storage", TOPIC, 0)
        client, worker = _actor("client:host-1"), _actor("worker:host-1")
        ids: list[list[int]] = []
        for start in range(0, jobs, per_record):
            n = min(per_record, jobs - start)
            events: list[Event] = [
                Enqueued(body=BODY, priority=1, run_after=T0, attempts_allowed=3) for _ in range(n)
            ]
            offset = log.append(T0 + start, client, events)
            ids.append([local_id_for(offset, i) for i in range(n)])
        projector.apply(log.records)
        print(f"{jobs} jobs of {len(BODY)} B, {per_record} per enqueue record")
        _report(store, jobs, "enqueued")
        done = len(log.records)
        for batch in ids:
            log.append(T0 + jobs, worker, [Claimed(i, f"claim-{i}") for i in batch])
            log.append(T0 + jobs + 1, worker, [Succeeded(i, "") for i in batch])
        projector.apply(log.records[done:])
        _report(store, jobs, "claimed and acked")
    finally:
        store.drop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--per-record", type=int, default=10)
    args = parser.parse_args()
    measure(args.jobs, args.per_record)


if __name__ == "__main__":
    main()
