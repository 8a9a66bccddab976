"""A poison record under load (issue 38; decision 0032), on the three-broker cluster: two
servers under load on the queue QUEUE (and a lighter load on a second queue), and a
record no store commits (an Enqueued whose custom status holds a NUL, which Postgres
refuses in text) appended straight to one partition of QUEUE through a Kafka producer,
around the Thrift edge (which refuses the NUL), in the middle of the load.

Checked: only that partition pauses (its owner's /ready names it under "paused" at the
record's offset, `pinledger_partition_paused` is 1); the other partitions of QUEUE and
the other queue are served throughout, and no call of either load fails. The owner is
then killed (SIGKILL): the server that takes the partition over pauses at the same
offset (the record stays in the log). `pinledger skip-record` resumes it. Every
acknowledged enqueue ends SUCCEEDED, the log replays to exactly the live tables (the
skip included), the surviving server still runs and stops cleanly.

The row in the table: recovery measured from the skip (until every partition of QUEUE
was served again); the details say when the pause was named, how long the partition was
paused until the skip, and when the survivor paused.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import pytest

from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Enqueued, Envelope
from pinledger.ledger.log import Append, queue_topic
from pinledger.service.testing.servers import ServerProcess, context, run_pinledger, wait_for
from tests.chaos.load import Load
from tests.chaos.report import ROWS, Row
from tests.chaos.stage import (
    PARTITIONS,
    QUEUE,
    RECOVERY_LIMIT_S,
    WARM_LIMIT_S,
    Stage,
    drain,
    replay_is_identical,
    still_running,
)

pytestmark = pytest.mark.chaos

OTHER = "bystander"
POISONED = 1
NAMED = f"{QUEUE}[{POISONED}]"
REASON = "a NUL in a custom status (chaos suite)"
# Bounds: the owner names the pause within seconds (it narrows the refused batch down
# to the record first); a server taking the partition over does so after the session
# timeout.
PAUSE_LIMIT_S = 30
TAKEOVER_LIMIT_S = 60
# How long the other partitions are watched serving while the partition is paused.
WATCH_S = 4


def append_poison(stage: Stage) -> int:
    """The record, into partition POISONED of QUEUE, as a foreign producer would; its
    offset."""
    actor = Actor("a-foreign-producer:host", "", "")
    poison = Envelope(int(time.time() * 1000), actor, (Enqueued(b"p", 1, 0, 3, "a\x00b"),))
    log = stage.log()
    try:
        [offset] = log.append(
            [Append(queue_topic(stage.prefix, QUEUE), POISONED, codec.encode(poison))]
        )
    finally:
        log.close()
    return offset


def paused_here(server: ServerProcess) -> str | None:
    """What the server's /ready says of the poisoned partition, when it names it."""
    try:
        with server.admin_get("/ready", timeout=5) as answer:
            body: dict[str, Any] = json.loads(answer.read())
    except OSError:
        return None  # 503 (a dependency down) or not answering: not named here now
    said: str | None = body.get("paused", {}).get(NAMED)
    return said


def paused_gauge(server: ServerProcess) -> str | None:
    with server.admin_get("/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(
        rf'^pinledger_partition_paused\{{partition="{POISONED}",queue="{QUEUE}"\}} (\S+)$',
        text,
        re.M,
    )
    return None if found is None else found.group(1)


def owner_of_pause(stage: Stage, among: list[int]) -> tuple[int, str] | None:
    for index in among:
        said = paused_here(stage.servers[index])
        if said is not None:
            return index, said
    return None


def skip_record(stage: Stage, offset: int) -> str:
    """`pinledger skip-record`, as an operator runs it; its output."""
    done = run_pinledger(
        *("skip-record", "--queue", QUEUE, "--partition", str(POISONED), "--offset", str(offset)),
        *("--reason", REASON),
        timeout=60,
        PINLEDGER_KAFKA=stage.cluster,
        PINLEDGER_TOPIC_PREFIX=stage.prefix,
        PINLEDGER_SCHEMA=stage.schema,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def logs(stage: Stage) -> str:
    return "\n".join(f"server {i} log:\n{s.log_tail()}" for i, s in enumerate(stage.servers))


def named_by_its_owner(stage: Stage, offset: int) -> int:
    """The server that names the pause (its /ready and its metric); its index."""
    owner, said = wait_for(lambda: owner_of_pause(stage, [0, 1]), PAUSE_LIMIT_S, 0.2)
    assert said.startswith(f"paused at offset {offset}: "), said
    assert "cannot be converted to text" in said, said  # Postgres's words
    assert paused_gauge(stage.servers[owner]) == "1"
    index: int = owner
    return index


def served_around_it(load: Load, other: Load, appended_at: float, named_at: float) -> None:
    """While the partition is paused, the other partitions and the other queue serve
    on, the poisoned one does not, and no call fails."""
    time.sleep(WATCH_S)
    watched = time.monotonic()
    served = load.served_between(named_at, watched)
    others = set(range(PARTITIONS)) - {POISONED}
    assert served >= others, f"only {sorted(served)} served:\n{load.since(named_at)}"
    assert POISONED not in load.served_between(named_at + 1, watched)
    assert other.served_between(named_at, watched) == set(range(PARTITIONS))
    failed = load.failures_between(appended_at, watched)
    failed += other.failures_between(appended_at, watched)
    assert not failed, [f.what for f in failed]


def taken_over(stage: Stage, load: Load, survivor: int, offset: int) -> None:
    """The server that takes the partition over pauses at the same record."""
    again = wait_for(lambda: paused_here(stage.servers[survivor]), TAKEOVER_LIMIT_S, 0.2)
    assert again.startswith(f"paused at offset {offset}: "), again
    assert paused_gauge(stage.servers[survivor]) == "1"


def test_a_poison_record_pauses_one_partition_under_load(stage: Stage) -> None:
    admin = stage.servers[0].client()
    admin.createQueue(context("chaos:admin"), OTHER)
    admin.close()
    with Load(stage.servers, QUEUE) as load, Load(stage.servers, OTHER, workers=1) as other:
        began = time.monotonic()
        wait_for(lambda: load.served_again(began, PARTITIONS), WARM_LIMIT_S, 0.2)
        wait_for(lambda: other.served_again(began, PARTITIONS), WARM_LIMIT_S, 0.2)
        time.sleep(2)

        appended_at = time.monotonic()
        offset = append_poison(stage)
        owner = named_by_its_owner(stage, offset)
        named_at = time.monotonic()
        served_around_it(load, other, appended_at, named_at)

        stage.servers[owner].kill()
        killed_at = time.monotonic()
        taken_over(stage, load, 1 - owner, offset)
        repaused_at = time.monotonic()

        skipped_at = time.monotonic()
        # Paused on both servers: not served since it was named.
        assert POISONED not in load.served_between(named_at + 1, skipped_at)
        shown = skip_record(stage, offset)
        skip_took_s = time.monotonic() - skipped_at
        assert f"skipped {QUEUE}[{POISONED}] offset {offset}" in shown, shown
        try:
            resumed_s: float = wait_for(
                lambda: load.served_again(skipped_at, PARTITIONS), RECOVERY_LIMIT_S, 0.1
            )
        except AssertionError:
            pytest.fail(
                f"not served again within {RECOVERY_LIMIT_S} s of the skip:\n"
                f"{load.since(skipped_at)}\n{logs(stage)}"
            )
        assert paused_here(stage.servers[1 - owner]) is None
        assert paused_gauge(stage.servers[1 - owner]) == "0"
        time.sleep(2)
        load.stop_producing()
        other.stop_producing()
        lost = drain(stage, load, {owner}) + drain(stage, other, {owner})
    still_running(stage, {owner})
    replay_is_identical(stage)
    failures = load.failures_between(appended_at, skipped_at + resumed_s)
    ROWS.append(
        Row(
            fault="poison record; its owner killed",
            jobs=len(load.record.enqueued) + len(other.record.enqueued),
            lost=len(lost),
            duplicate_runs=load.duplicate_runs() + other.duplicate_runs(),
            recovered_s=resumed_s,
            measured_from="skip",
            failed_calls=len(failures),
            longest_failed_call_s=max((f.seconds for f in failures), default=0.0),
            answers=Counter(f.what[:110] for f in failures),
            details=[
                f"/ready named the pause {named_at - appended_at:.1f} s after the append; "
                f"the other {PARTITIONS - 1} partitions and queue {OTHER!r} served "
                "throughout, no call failed until the kill",
                f"the survivor paused at the same offset {repaused_at - killed_at:.1f} s "
                "after the owner was killed",
                f"paused {skipped_at - appended_at:.1f} s in all until `pinledger "
                f"skip-record` ({skip_took_s:.1f} s to run); every partition served again "
                f"{resumed_s:.1f} s after it was started",
            ],
        )
    )
    assert not lost, f"{len(lost)} acknowledged jobs were lost: {lost[:10]}"
