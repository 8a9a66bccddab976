"""A rolling upgrade, as docs/guides/upgrading.md tells an operator to do it (decision 0025):
two servers of the previous release (the newest `v*` tag, built into a wheel) under
enqueue + dequeue + ack load; the schema migrated by this release; each server replaced
by one of this release, one at a time; then the ledger format raised. Nothing
acknowledged is lost, and the replay of the log is identical to the live tables.

Also: a server refuses to start on a ledger format it cannot read, and a running one
stops when the format is raised past it.
"""

from __future__ import annotations

import re
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pinledger.ledger import codec, formats
from pinledger.ledger.events import Actor
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.log import catalog_topic
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.partition_log import read_partition
from pinledger.projections.pg.store import Store
from pinledger.projections.projector import Scope
from pinledger.projections.replay import replay
from pinledger.service.config import Config
from pinledger.service.server import EXIT_UNREADABLE_FORMAT
from pinledger.service.testing.servers import ServerProcess, context, run_pinledger, wait_for
from tests.chaos.load import Load
from tests.integration.conftest import server_settings
from tests.integration.releases import installed, previous_release, run_with

pytestmark = pytest.mark.integration

QUEUE = "upgrade"
# Liveness bounds, not expectations.
DRAIN_LIMIT_S = 120
FOLLOW_LIMIT_S = 30
SETTINGS = {"PINLEDGER_CLAIM_TIMEOUT_S": "5", "PINLEDGER_PARTITIONS": "4"}


def _server(names: tuple[str, str], release: Path | None, cwd: Path) -> ServerProcess:
    """A server of this checkout, or of the installed `release` (run from `cwd`, outside
    the checkout, with the release first on PYTHONPATH)."""
    prefix, schema = names
    settings = server_settings(**SETTINGS)
    if release is None:
        return ServerProcess(prefix=prefix, schema=schema, settings=settings)
    settings["PYTHONPATH"] = str(release)
    return ServerProcess(
        prefix=prefix,
        schema=schema,
        settings=settings,
        command=(sys.executable, "-m", "pinledger", "serve"),
        cwd=cwd,
    )


def _ledger_format(server: ServerProcess) -> float | None:
    """The ledger format a server says it follows (None: a release without formats)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.admin_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    found = re.search(r"^pinledger_ledger_format(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def _served_more(load: Load, jobs: int = 20) -> None:
    """Wait until the workers ran `jobs` more jobs: the service serves on."""
    before = len(load.record.runs)
    wait_for(lambda: len(load.record.runs) >= before + jobs, 60)


def _replace(
    servers: list[ServerProcess], load: Load, index: int, names: tuple[str, str], cwd: Path
) -> None:
    """Stop one server (cleanly, SIGTERM), start one of this release in its place."""
    old = servers[index]
    old.stop()
    assert old.proc is not None and old.proc.returncode == 0, old.log_tail()
    servers[index] = load.servers[index] = _server(names, None, cwd).start(cwd)


def _replays_identically(config: Config, kafka: KafkaLog, names: tuple[str, str]) -> None:
    prefix, schema = names
    live, scratch = Store(config.pg_dsn, schema), Store(config.pg_dsn, f"{schema}_replay")
    try:
        report = replay(live, scratch, kafka, prefix, Scope())
        assert report.identical, report.diffs
    finally:
        live.close()
        scratch.drop()


def _upgrade_format(prefix: str, *args: str) -> tuple[int, str]:
    done = run_pinledger("upgrade-format", *args, PINLEDGER_TOPIC_PREFIX=prefix)
    return done.returncode, done.stdout + done.stderr


def test_a_rolling_upgrade_from_the_previous_release_loses_nothing(
    names: tuple[str, str], config: Config, kafka: KafkaLog, tmp_path: Path
) -> None:
    prefix, schema = names
    tag, commit = previous_release()
    release = installed(tag, commit)
    said = run_with(release, tmp_path, "--version").stdout
    assert said.startswith(f"pinledger {tag.removeprefix('v')} "), said

    # 1. The schema first, by this release (its migrations run while servers serve).
    done = run_pinledger("migrate", PINLEDGER_SCHEMA=schema)
    assert done.returncode == 0, done.stderr
    # 2. Two servers of the previous release, under load.
    servers = [_server(names, release, tmp_path).start(tmp_path) for _ in range(2)]
    try:
        client = servers[0].client()
        client.createQueue(context(), QUEUE)
        client.close()
        with Load(servers, QUEUE, producers=2, workers=2, batch=1, pause_s=0.02) as load:
            _served_more(load)
            # 3. One server at a time: stop it, start one of this release in its place.
            _replace(servers, load, 0, names, tmp_path)
            # Mixed versions: the old server reads format 1 only, so the format stays
            # where it is, and the new server writes what the old one reads.
            assert _ledger_format(servers[0]) == 1
            code, out = _upgrade_format(prefix, "--check")
            assert code == 2 and "advertises no formats" in out, out
            _served_more(load)
            _replace(servers, load, 1, names, tmp_path)
            _served_more(load)
            # 4. Every server reads this release's newest format: raise it; both follow
            # within a tick.
            code, out = _upgrade_format(prefix, "--check")
            raised = f"ledger format from 1 to {formats.LATEST}"
            assert code == 0 and f"would raise the {raised}" in out, out
            code, out = _upgrade_format(prefix)
            assert code == 0 and f"raised the {raised}" in out, out
            for server in servers:
                wait_for(lambda s=server: _ledger_format(s) == formats.LATEST, FOLLOW_LIMIT_S)
            _served_more(load)
            load.stop_producing()
            # 5. Nothing acknowledged is lost: every acknowledged enqueue completes.
            checker = servers[0].client()
            try:
                wait_for(lambda: not load.unfinished(checker), DRAIN_LIMIT_S, 1.0)
            finally:
                checker.close()
        assert len(load.record.enqueued) > 60
        code, out = _upgrade_format(prefix)
        assert code == 0 and f"already at format {formats.LATEST}" in out, out
    finally:
        for server in servers:
            server.stop()
    # 6. The log replays to the live tables, records of both releases and formats alike.
    _replays_identically(config, kafka, names)
    topic = catalog_topic(prefix)
    catalog = [
        event
        for record in read_partition(kafka, topic, 0, 0, kafka.end_offset(topic, 0))
        for event in codec.decode(record.value).events
    ]
    assert [type(e).__name__ for e in catalog] == ["QueueCreated", "FormatRaised"]


def test_a_server_refuses_a_format_it_cannot_read_and_stops_when_raised_past_it(
    names: tuple[str, str], kafka: KafkaLog, tmp_path: Path
) -> None:
    prefix, _ = names
    server = _server(names, None, tmp_path).start(tmp_path)
    try:
        # A new catalog starts at the newest format.
        assert _ledger_format(server) == formats.LATEST
        # A later release raised the format (written here as it would write it).
        later = formats.LATEST + 1
        LedgerWriter(kafka, prefix).raise_format(later, int(time.time() * 1000), Actor("test"))
        assert server.proc is not None
        wait_for(lambda: server.proc is not None and server.proc.poll() is not None, 30)
        assert server.proc.returncode == EXIT_UNREADABLE_FORMAT, server.log_tail()
        assert f"ledger format is {later}" in server.log()
    finally:
        server.stop()
    starting = _server(names, None, tmp_path)
    with pytest.raises(RuntimeError, match="exited") as refused:
        starting.start(tmp_path)
    assert f"upgrade this server to a release that reads format {later}" in str(refused.value)
    code, out = _upgrade_format(prefix, "--to", "2")
    assert code == 0 and f"already at format {later}" in out, out
