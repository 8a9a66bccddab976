"""A queue deleted and created again under its name while the owners' group rebalances
(issue 38; decision 0032), on the three-broker cluster: two servers under load on the
queue QUEUE, and a queue INCARNATED under its own load (tests/chaos/incarnations.py),
deleted and created again in three rounds, each while the group rebalances:
1. deleteQueue and createQueue as a server joins;
2. the server deleting the queue is killed (SIGKILL) between deleteQueue's two steps:
   the catalog records the deletion, the topic is left (Kafka deletes topics in the
   background; a server may die in between); the client sees the queue gone and calls
   createQueue, which subscribes the old topic at once and is asked to retry while it
   removes it; the group rebalances for that subscription and for the killed server;
3. deleteQueue and createQueue as one server is killed and another joins.

Without decision 0032's offsets (owners creating a missing offset at 0 when adopting a
partition, a creation keeping what the store held under the name), round 2 brought the
deleted queue's jobs back into the new queue (counted, looked up, handed out and run
again) and the new queue's first records were skipped until its topic passed the old
one's offsets (served a minute late).

Checked after each round: no job of an earlier round, nor one enqueued into the queue
being deleted, is counted in the queue (by body), found by a lookup of its descriptor
(a new job may have the same descriptor: the body tells) or handed out by a dequeue;
the new queue is served. At the end: every acknowledged enqueue of the newest round is
SUCCEEDED, QUEUE lost nothing, the log replays to exactly the live tables, the servers
not killed on purpose still run as the same processes and stop cleanly. createQueue
asking for a retry is retried as a client would, and counted.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Envelope, QueueDeleted
from pinledger.ledger.log import Append, catalog_topic
from pinledger.service.testing.servers import context, describe, wait_for
from tests.chaos.incarnations import CREATING, DELETING, SETTLED, Incarnations, round_of
from tests.chaos.load import Load
from tests.chaos.report import ROWS, Row
from tests.chaos.stage import (
    ADMIN_PASSWORD,
    DRAIN_LIMIT_S,
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

T = TypeVar("T")

INCARNATED = "incarnated"
# How long createQueue is retried while it asks for a retry.
CREATE_LIMIT_S = 60
# A server started joins the group about this long after it is started (it imports,
# connects, migrates the schema first): the queue is deleted then.
JOIN_DELAY_S = 2.5
ADMIN = "chaos:admin"
COUNTED = (p.PinLaterJobState.PENDING, p.PinLaterJobState.IN_PROGRESS, p.PinLaterJobState.SUCCEEDED)


@dataclass
class Rounds:
    """What the rounds measured, and a timeline for failure messages."""

    began: float = field(default_factory=time.monotonic)
    timeline: list[str] = field(default_factory=list)
    served_s: list[float] = field(default_factory=list)
    create_retries: int = 0
    killed: set[int] = field(default_factory=set)

    def say(self, what: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.began:6.1f} s  {what}")


def retried(call: Callable[[], T], failed: Callable[[Exception], None] = lambda _: None) -> T:
    """A call, tried again while it answers SHARD_CONNECTION_FAILED (a partition's owner
    is moving it as the group rebalances; a server has not seen the new topic yet), as a
    client would; each failure told to `failed`."""
    deadline = time.monotonic() + RECOVERY_LIMIT_S
    while True:
        try:
            return call()
        except p.PinLaterException as exc:
            if exc.errorCode != p.ErrorCode.SHARD_CONNECTION_FAILED or time.monotonic() > deadline:
                raise
            failed(exc)
            time.sleep(0.5)


def create(client: Any, name: str) -> int:
    """createQueue, retried while it asks for a retry (the old topic is still being
    deleted); how many times it asked."""
    asked = 0
    deadline = time.monotonic() + CREATE_LIMIT_S
    while True:
        try:
            client.createQueue(context(ADMIN), name)
            return asked
        except p.PinLaterException as exc:
            if "retry createQueue" not in exc.message or time.monotonic() > deadline:
                raise
            asked += 1
            time.sleep(1)


def lookup(client: Any, descriptors: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for start in range(0, len(descriptors), 500):
        request = p.PinLaterLookupJobRequest(
            jobDescriptors=descriptors[start : start + 500], includeBody=True
        )
        found.update(client.lookupJobs(context(ADMIN), request))
    return found


def not_this_rounds(client: Any, incarnations: Incarnations, current: int) -> list[str]:
    """What the queue shows, in round `current`, of an earlier round or of a deleted
    queue: counted by body, found by a lookup, or handed out by a dequeue."""
    shown: list[str] = []
    earlier = "|".join(str(r) for r in range(current))
    for state in COUNTED:
        for future in (False, True):
            request = p.PinLaterGetJobCountRequest(
                queueName=INCARNATED,
                jobState=state,
                countFutureJobs=future,
                bodyRegexToMatch=f"^[rx]({earlier})-",
            )
            counted = client.getJobCount(context(ADMIN), request)
            if counted:
                name = p.PinLaterJobState._VALUES_TO_NAMES[state]
                shown.append(f"getJobCount: {counted} {name} job(s) of an earlier round")
    descriptors, bodies = incarnations.not_this_round(current)
    for d, info in lookup(client, sorted(descriptors)).items():
        if info.body in bodies or round_of(info.body) < current:
            name = p.PinLaterJobState._VALUES_TO_NAMES[info.jobState]
            shown.append(f"lookupJobs {d}: {info.body!r}, {name}")
    return shown + incarnations.stale()


def unfinished(client: Any, acked: dict[str, bytes]) -> list[str]:
    """The acknowledged enqueues not SUCCEEDED, or not these jobs at all."""
    found = lookup(client, sorted(acked))
    succeeded = p.PinLaterJobState.SUCCEEDED
    return [
        d if d not in found else f"{d}: {found[d].body!r} in state {found[d].jobState}"
        for d, body in acked.items()
        if d not in found or found[d].jobState != succeeded or found[d].body != body
    ]


# -- the rounds: each deletes the queue while the group rebalances, then creates it ---


def _join(stage: Stage) -> Callable[[], None]:
    """Start another server; what waits until it is up."""
    server = stage.new_server()
    stage.servers.append(server)
    starting = threading.Thread(target=server.start, args=(stage.log_dir,), daemon=True)
    starting.start()

    def finish() -> None:
        starting.join(timeout=90)
        assert server.proc is not None and server.proc.poll() is None, server.log_tail()
        stage.pids.append(server.proc.pid)

    return finish


def delete(admin: Any) -> None:
    admin.deleteQueue(context(ADMIN), INCARNATED, ADMIN_PASSWORD)


def while_a_server_joins(stage: Stage, admin: Any, rounds: Rounds) -> Callable[[], None]:
    finish = _join(stage)
    time.sleep(JOIN_DELAY_S)
    rounds.say("deleteQueue")
    delete(admin)
    return finish


def while_its_server_is_killed(stage: Stage, admin: Any, rounds: Rounds) -> Callable[[], None]:
    """The server deleting the queue is killed between deleteQueue's two steps: the
    catalog's record of the deletion is appended (here, as that server would), the topic
    is left. The client, its call failed, sees the queue gone from getQueueNames and
    creates it again (the round goes on with createQueue), while the group rebalances:
    at once, for that createQueue, and at the session timeout, for the killed server."""
    killed = len(stage.servers) - 1  # the server that joined in the round before
    log = stage.log()
    try:
        at = int(time.time() * 1000)
        actor = Actor(ADMIN, "", f"test-{stage.servers[killed].port}")  # its server id
        record = Envelope(at, actor, (QueueDeleted(INCARNATED),))
        log.append([Append(catalog_topic(stage.prefix), 0, codec.encode(record))])
    finally:
        log.close()
    stage.servers[killed].kill()
    rounds.killed.add(killed)
    rounds.say("deletion recorded, its server killed, its topic left")
    wait_for(lambda: INCARNATED not in admin.getQueueNames(context(ADMIN)), 30, 0.1)
    return lambda: None


def while_one_is_killed_and_another_joins(
    stage: Stage, admin: Any, rounds: Rounds
) -> Callable[[], None]:
    stage.servers[1].kill()
    rounds.killed.add(1)
    finish = _join(stage)
    time.sleep(JOIN_DELAY_S)
    rounds.say("deleteQueue")
    delete(admin)
    return finish


ROUNDS = {
    "a server joins": while_a_server_joins,
    "its deleting server killed midway": while_its_server_is_killed,
    "one server killed, another joins": while_one_is_killed_and_another_joins,
}
LAST = len(ROUNDS)


def one_round(
    stage: Stage, admin: Any, incarnations: Incarnations, rounds: Rounds, round_: int
) -> None:
    name, deletion = list(ROUNDS.items())[round_ - 1]
    rounds.say(f"round {round_}: {name}")
    deleted_at = time.monotonic()
    incarnations.to(round_, DELETING)
    finish = deletion(stage, admin, rounds)
    rounds.say("createQueue")
    incarnations.to(round_, CREATING)
    rounds.create_retries += create(admin, INCARNATED)
    incarnations.to(round_, SETTLED)
    rounds.say("created")
    try:
        wait_for(lambda: round_ in incarnations.served_at, RECOVERY_LIMIT_S, 0.1)
    except AssertionError:
        pytest.fail(f"round {round_}: the new queue was not served\n{story(stage, rounds)}")
    rounds.served_s.append(incarnations.served_at[round_] - deleted_at)
    rounds.say("served")
    shown = retried(
        functools.partial(not_this_rounds, admin, incarnations, round_),
        lambda exc: rounds.say(f"check retried: {describe(exc)[:300]}"),
    )
    rounds.say("checked")
    finish()
    assert not shown, (
        f"round {round_}: the queue shows jobs it must not:\n"
        + "\n".join(shown[:30])
        + f"\n{story(stage, rounds)}"
    )


def test_a_queue_deleted_and_created_again_while_the_group_rebalances(stage: Stage) -> None:
    admin = stage.servers[0].client()
    incarnations = Incarnations(INCARNATED, stage.servers)
    rounds = Rounds()
    create(admin, INCARNATED)
    with Load(stage.servers, QUEUE) as load, incarnations.running():
        wait_for(lambda: load.served_again(rounds.began, PARTITIONS), WARM_LIMIT_S, 0.2)
        wait_for(lambda: 0 in incarnations.served_at, WARM_LIMIT_S, 0.2)
        time.sleep(2)  # records of round 0 in every partition
        rounds.say("warm")
        for round_ in range(1, LAST + 1):
            one_round(stage, admin, incarnations, rounds, round_)
        load.stop_producing()
        incarnations.producing.clear()
        with incarnations.lock:
            newest = dict(incarnations.acked[LAST])
        left: list[str] = []

        def finished() -> bool:
            nonlocal left
            left = retried(functools.partial(unfinished, admin, newest))
            return not left

        with contextlib.suppress(AssertionError):  # `left` says which
            wait_for(finished, DRAIN_LIMIT_S, 1.0)
        lost = drain(stage, load, rounds.killed)
        rounds.say("drained")
    admin.close()
    assert not left, (
        f"{len(left)} of the {len(newest)} acknowledged enqueues of round {LAST} did not "
        f"end SUCCEEDED: {left[:10]}\n{story(stage, rounds)}"
    )
    assert not incarnations.stale(), incarnations.stale()[:20]
    still_running(stage, rounds.killed)
    replay_is_identical(stage)
    rounds.say("replayed")
    print("\n".join(rounds.timeline))  # shown by pytest -rP
    check(row(load, incarnations, rounds, lost))


def row(load: Load, incarnations: Incarnations, rounds: Rounds, lost: list[str]) -> Row:
    with incarnations.lock:
        answers = Counter(incarnations.failures)
        enqueued = sum(len(jobs) for jobs in incarnations.acked.values())
        gone = len(incarnations.gone)
        newest = len(incarnations.acked[LAST])
    failures = load.record.failures
    return Row(
        fault=f"queue deleted + created {LAST}x, rebalancing",
        jobs=len(load.record.enqueued),
        lost=len(lost),
        duplicate_runs=load.duplicate_runs(),
        recovered_s=max(rounds.served_s),
        measured_from="delete",
        failed_calls=len(failures),
        longest_failed_call_s=max((f.seconds for f in failures), default=0.0),
        answers=Counter(f.what[:110] for f in failures),
        details=[
            f"{INCARNATED!r} served again (a job of the new queue dequeued and acked) "
            + ", ".join(f"{s:.1f} s" for s in rounds.served_s)
            + " after the deletion began, rounds: "
            + "; ".join(ROUNDS),
            f"createQueue asked for a retry {rounds.create_retries} time(s)",
            f"{enqueued} jobs acknowledged in {INCARNATED!r} over the rounds ({newest} in the "
            f"last, all SUCCEEDED), {gone} into a queue being deleted; none of an earlier "
            "round or a deleted queue ever seen",
            *(f"{INCARNATED!r} calls: {n} x {what}" for what, n in answers.most_common(4)),
        ],
    )


def check(row: Row) -> None:
    ROWS.append(row)
    assert row.lost == 0, f"{row.fault}: {row.lost} acknowledged jobs of {QUEUE!r} were lost"


def story(stage: Stage, rounds: Rounds) -> str:
    """The timeline and the servers' logs."""
    logs = [f"server {i} log:\n{s.log_tail()}" for i, s in enumerate(stage.servers)]
    return "\n".join([*rounds.timeline, *logs])
