"""A random but plausible workload written to the real log: enqueues, claims, acks from
the right and the wrong workers, checkpoints, timeouts, retries, deletes and GC.

It keeps its own fold of what it wrote (through the same `evolve`), so tests can
compare the projection with what the ledger must contain.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pinledger.ledger.descriptor import JOBS_PER_RECORD
from pinledger.ledger.events import (
    Actor,
    Checkpointed,
    Claimed,
    Collected,
    Deleted,
    Enqueued,
    Failed,
    JobEvent,
    Retried,
    Succeeded,
    TimedOut,
)
from pinledger.ledger.state import (
    FINISHED,
    Job,
    JobState,
    Stamp,
    event_local_id,
    evolve,
    key_holder,
)
from pinledger.ledger.writer import LedgerWriter

WORKERS = ("worker:a", "worker:b", "worker:c")


@dataclass
class Workload:
    writer: LedgerWriter
    queue: str
    partitions: int
    seed: int = 0
    now: int = 1_700_000_000_000
    # Some enqueues carry a key of a few (unique jobs, decision 0037).
    keys: bool = False
    jobs: list[dict[int, Job]] = field(default_factory=list)
    events_written: int = 0
    claims: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.jobs = [{} for _ in range(self.partitions)]

    def _pick(self, partition: int, states: set[JobState], count: int) -> list[Job]:
        candidates = [j for j in self.jobs[partition].values() if j.state in states]
        return self.rng.sample(candidates, min(count, len(candidates)))

    def _events(self, partition: int) -> tuple[list[JobEvent], str]:
        rng = self.rng
        source = rng.choice(WORKERS)
        action = rng.choices(
            ["enqueue", "claim", "ack", "checkpoint", "timeout", "admin"],
            weights=[4, 4, 5, 2, 1, 1],
        )[0]
        if action == "enqueue" or not self.jobs[partition]:
            return [
                Enqueued(
                    body=rng.randbytes(rng.randint(0, 40)),
                    priority=rng.randint(1, 3),
                    run_after=self.now + rng.choice([-1000, 0, 0, 5000]),
                    attempts_allowed=rng.randint(1, 3),
                    custom_status=rng.choice(["", "new"]),
                    **self._key(),
                )
                for _ in range(rng.randint(1, 20))
            ], source
        if action == "claim":
            self.claims += 1
            claim = f"srv:{self.seed}:{source}:{self.claims}"
            return [
                Claimed(j.local_id, claim)
                for j in self._pick(partition, {JobState.PENDING}, rng.randint(1, 10))
            ], source
        if action == "ack":
            events: list[JobEvent] = []
            for job in self._pick(partition, {JobState.IN_PROGRESS, JobState.PENDING}, 6):
                if rng.random() < 0.5:
                    events.append(Succeeded(job.local_id, rng.choice(["", " ok"])))
                else:
                    events.append(Failed(job.local_id, rng.choice([0, 100, 3000]), " err"))
            # Mostly the claiming worker acks; sometimes a stale or foreign one does.
            in_progress = [j for j in self.jobs[partition].values() if j.claim_source]
            if in_progress and rng.random() < 0.8:
                source = rng.choice(in_progress).claim_source or source
            return events, source
        if action == "checkpoint":
            return [
                Checkpointed(
                    j.local_id,
                    new_body=rng.choice([None, b"next"]),
                    move_to_pending=rng.random() < 0.4,
                    run_after=rng.choice([None, self.now + 2000]),
                    attempts_allowed=rng.choice([None, 2]),
                    prepend_status=rng.choice([None, "ck "]),
                )
                for j in self._pick(partition, {JobState.IN_PROGRESS}, 3)
            ], source
        if action == "timeout":
            return [
                TimedOut(j.local_id, j.claim or "", j.touched_at or 0)
                for j in self._pick(partition, {JobState.IN_PROGRESS}, 4)
            ], "owner"
        kind = rng.choice(["retry", "delete", "gc"])
        if kind == "retry":
            return [
                Retried(j.local_id, 2, self.now)
                for j in self._pick(partition, {JobState.FAILED}, 5)
            ], "admin"
        if kind == "delete":
            return [Deleted(j.local_id) for j in self._pick(partition, set(JobState), 2)], "admin"
        return [Collected(j.local_id) for j in self._pick(partition, set(FINISHED), 5)], "gc"

    def _key(self) -> dict[str, Any]:
        if not self.keys or self.rng.random() < 0.5:
            return {}
        return {
            "unique_key": f"k{self.rng.randrange(6)}",
            "unique_for_ms": self.rng.choice([0, 0, 2000]),
        }

    def run(self, records: int) -> None:
        """Write `records` records (several events each) spread over the partitions."""
        for _ in range(records):
            partition = self.rng.randrange(self.partitions)
            events, source = self._events(partition)
            if not events:
                continue
            self.now += self.rng.randint(0, 1500)
            actor = Actor(source=source, request_id=f"r{self.events_written}", server="test")
            offset = self.writer.append(self.queue, partition, events, self.now, actor)
            self._fold(partition, events, Stamp(self.now, actor), offset)

    def _fold(self, partition: int, events: list[JobEvent], stamp: Stamp, offset: int) -> None:
        assert len(events) <= JOBS_PER_RECORD
        jobs = self.jobs[partition]
        for idx, event in enumerate(events):
            local_id = event_local_id(event, offset, idx)
            holder = None
            if isinstance(event, Enqueued) and event.unique_key:
                key = event.unique_key
                holder = key_holder(event, stamp, (j for j in jobs.values() if j.unique_key == key))
            after, _ = evolve(jobs.get(local_id), event, stamp, local_id, holder)
            if after is None:
                jobs.pop(local_id, None)
            else:
                jobs[local_id] = after
            self.events_written += 1
