"""The peer: PgQueuer (a well-known Postgres job queue for Python) running the same
enqueue + complete workload against the same Postgres, in a schema of its own
(PGQUEUER_SCHEMA) that is dropped afterwards. Like the pinledger side, one process
drives it; `concurrency` connections, one per asyncio task."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import psycopg
from pgqueuer import PsycopgDriver, Queries, QueueManager

from bench.cpu import Window
from bench.stats import Counter, Progress

BODY = b'{"task":"noop"}'
ENTRYPOINT = "noop"


class Peer:
    """PgQueuer installed in a fresh schema; `close()` drops it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.schema = f"bench_pgq_{uuid.uuid4().hex[:8]}"
        # PgQueuer reads its object names from the environment when Queries is built.
        os.environ["PGQUEUER_SCHEMA"] = self.schema
        os.environ["PGQUEUER_PREFIX"] = f"{self.schema}_"

    async def _connect(self) -> Any:
        return await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, options=f"-c search_path={self.schema}"
        )

    async def _queries(self) -> tuple[Any, Any]:
        conn = await self._connect()
        return conn, Queries(PsycopgDriver(conn))

    def install(self) -> None:
        async def run() -> None:
            conn, queries = await self._queries()
            try:
                await queries.install()
            finally:
                await conn.close()

        asyncio.run(run())

    def close(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg.sql.Identifier(self.schema)
                )
            )

    def _clear(self) -> None:
        async def run() -> None:
            conn, queries = await self._queries()
            try:
                await queries.clear_queue()
                await queries.clear_queue_log()
            finally:
                await conn.close()

        asyncio.run(run())

    def enqueue(
        self, jobs: int, per_call: int, tasks: int, label: str, cpu: Window | None = None
    ) -> float:
        """Enqueue `jobs` no-op jobs, `per_call` per call; returns jobs/s (and the CPU
        the phase cost, into `cpu`)."""
        calls = max(1, jobs // per_call)
        shares = [calls // tasks + (1 if i < calls % tasks else 0) for i in range(tasks)]
        done = Counter()

        async def work(share: int, queries: Any) -> None:
            for _ in range(share):
                if per_call == 1:
                    await queries.enqueue(ENTRYPOINT, BODY)
                else:
                    await queries.enqueue(
                        [ENTRYPOINT] * per_call, [BODY] * per_call, [0] * per_call
                    )
                done.add(per_call)

        seconds = self._timed(
            tasks, lambda i, q: work(shares[i], q), label, calls * per_call, done, cpu=cpu
        )
        if cpu is not None:
            cpu.jobs = done.get()
        return done.get() / seconds

    def complete(
        self, jobs: int, batch: int, tasks: int, label: str, cpu: Window | None = None
    ) -> float:
        """Prefill `jobs`, then run `tasks` QueueManagers (dequeue batch `batch`, a no-op
        entrypoint) until the queue is drained; returns completed jobs/s."""
        self._clear()
        self.enqueue(jobs, min(1000, jobs), 2, f"{label} (prefill)")
        done = Counter()
        managers: list[Any] = []

        async def work(index: int, queries: Any) -> None:
            if index == tasks:
                await watch(queries)
                return
            manager = QueueManager(queries)
            managers.append(manager)

            @manager.entrypoint(ENTRYPOINT)
            async def noop(job: Any) -> None:
                done.add(1)

            await manager.run(
                batch_size=batch,
                dequeue_timeout=_seconds(0.05),
                log_aggregation_interval=_seconds(0),
            )

        async def watch(queries: Any) -> None:
            # A job is complete once PgQueuer moved it from its queue table to its log
            # (the workers buffer these writes); then stop the workers.
            while True:
                await asyncio.sleep(0.01)
                if done.get() >= jobs and not sum(s.count for s in await queries.queue_size()):
                    break
            for manager in managers:
                manager.shutdown.set()

        seconds = self._timed(tasks + 1, work, label, jobs, done, stop_at=tasks, cpu=cpu)
        if cpu is not None:
            cpu.jobs = jobs
        return jobs / seconds

    def _timed(
        self,
        tasks: int,
        work: Callable[[int, Any], Awaitable[None]],
        label: str,
        total: int,
        done: Counter,
        stop_at: int | None = None,
        cpu: Window | None = None,
    ) -> float:
        """Run `work(index, queries)` on `tasks` connections; the time ends when every
        task ended, or when task `stop_at` did (the others then wind down untimed).
        `cpu` samples over the same time."""

        async def run() -> float:
            opened = [await self._queries() for _ in range(tasks)]
            try:
                if cpu is not None:
                    cpu.start()
                started = time.perf_counter()
                running = [asyncio.ensure_future(work(i, q)) for i, (_, q) in enumerate(opened)]
                if stop_at is None:
                    await asyncio.gather(*running)
                    seconds = time.perf_counter() - started
                    if cpu is not None:
                        cpu.stop()
                    return seconds
                await running[stop_at]
                seconds = time.perf_counter() - started
                if cpu is not None:
                    cpu.stop()
                # Workers take seconds to notice shutdown; nothing is timed any more.
                _, late = await asyncio.wait(running, timeout=2)
                for task in late:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)
                return seconds
            finally:
                for conn, _ in opened:
                    await conn.close()

        with Progress(f"PgQueuer {label}", total, done.get):
            return asyncio.run(run())


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
