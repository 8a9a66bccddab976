"""Periodic jobs on real servers (issue 42 part 2, decision 0038): a schedule ticks every
two seconds on the server that holds the duty; that server is SIGKILLed and the other
takes the duty over. No tick has two jobs, every tick from the first to the last either
ran or is counted missed by the new holder (none silently skipped), the queue holds one
job per tick run, `pinledger schedules` shows the last tick, and verify's fold of the log
gives the projection the servers built."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from pinledger.client import PinLaterClient
from pinledger.client.jobs import JobState
from pinledger.ledger.events import ScheduleTicked
from pinledger.ledger.log import Log
from pinledger.projections.catalog_log import catalog_envelopes
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.verify import verify
from pinledger.service.config import Config
from pinledger.service.testing.servers import ServerProcess, run_pinledger, wait_for
from tests.integration.conftest import server_settings

pytestmark = pytest.mark.integration

EVERY_MS = 2000


def _ticks(kafka: Log, prefix: str) -> list[tuple[ScheduleTicked, str]]:
    """The schedule's recorded ticks with a job, and the server that recorded each."""
    return [
        (event, envelope.actor.server)
        for envelope in catalog_envelopes(kafka, prefix)
        for event in envelope.events
        if isinstance(event, ScheduleTicked) and event.job
    ]


def test_a_killed_duty_holder_neither_doubles_nor_silently_skips_a_tick(
    names: tuple[str, str], tmp_path: Path, kafka: Log, config: Config
) -> None:
    prefix, schema = names
    queue = f"ticking_{uuid.uuid4().hex[:6]}"
    schedule = {"name": "tick", "everySeconds": EVERY_MS // 1000, "body": "tick"}
    queue_config = tmp_path / "queues.json"
    queue_config.write_text(
        json.dumps({"queues": [{"name": queue, "queueConfig": {"schedules": [schedule]}}]})
    )
    settings = server_settings(
        PINLEDGER_QUEUE_CONFIG=str(queue_config), PINLEDGER_SESSION_TIMEOUT_MS="6000"
    )
    first = ServerProcess(prefix=prefix, schema=schema, settings=settings).start(tmp_path)
    second = ServerProcess(prefix=prefix, schema=schema, settings=settings)
    try:
        with PinLaterClient([f"127.0.0.1:{first.port}"]) as client:
            client.create_queue(queue)
        # Alone, the first server owns the catalog: it holds the duty.
        wait_for(lambda: len(_ticks(kafka, prefix)) >= 2, timeout=60)
        second.start(tmp_path)
        first.kill()
        taken_over = f"test-{second.port}"
        wait_for(
            lambda: sum(1 for _, by in _ticks(kafka, prefix) if by == taken_over) >= 3,
            timeout=90,
        )
        ticks = _ticks(kafka, prefix)
        jobs: dict[int, set[str]] = {}
        for tick, _ in ticks:
            jobs.setdefault(tick.tick_ms, set()).add(tick.job)
        assert all(len(found) == 1 for found in jobs.values()), jobs  # never two jobs
        ran = sorted(jobs)
        assert {t % EVERY_MS for t in ran} == {0}
        missed = _missed(second.log())
        span = (ran[-1] - ran[0]) // EVERY_MS + 1
        assert len(ran) + missed == span, (ran, missed)  # each tick ran or was counted
        # The group's session timeout (6 s) passed before the second server took over:
        # at least two ticks came due meanwhile, the latest ran and the others are counted.
        assert missed >= 1, (ran, missed)
        with PinLaterClient([f"127.0.0.1:{second.port}"]) as client:
            assert client.count(queue, JobState.PENDING) >= len(ran)
            infos = client.lookup([next(iter(jobs[t])) for t in ran])
            assert {info.unique_key for info in infos.values()} == {
                f"schedule:tick:{t}" for t in ran
            }
        second.stop()
        shown = run_pinledger(
            "schedules",
            "--json",
            PINLEDGER_QUEUE_CONFIG=str(queue_config),
            PINLEDGER_TOPIC_PREFIX=prefix,
            PINLEDGER_SCHEMA=schema,
        )
        assert shown.returncode == 0, shown.stderr
        (line,) = [json.loads(text) for text in shown.stdout.splitlines()]
        assert line["queue"] == queue and line["schedule"] == "tick"
        assert line["last_tick_ms"] >= ran[-1]
        assert line["next_tick_ms"] == line["last_tick_ms"] + EVERY_MS
    finally:
        first.kill()
        second.stop()
    store = Store(config.pg_dsn, schema)
    try:
        report = verify(store, kafka, prefix, Scope())
    finally:
        store.close()
    assert report.identical, report.diffs


def _missed(log: str) -> int:
    """The ticks a server said it did not run (schedules.py's warning)."""
    return sum(int(n) for n in re.findall(r"(\d+) tick\(s\) before \S+ \S+ were due", log))
