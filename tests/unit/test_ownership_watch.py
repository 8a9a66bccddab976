"""The owner's watch for partitions that nobody serves: a queue topic owned by no server
(kafka-python can leave a topic created during a rebalance out of the assignment), or an
owned partition whose records are not fetched. Either makes the owner ask the group to
rebalance."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.fake_clock import FakeClock
from pinledger.ledger.fake_log import FakeLog
from pinledger.ledger.log import GroupMember
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.fake.store import FakeStore
from pinledger.service.config import Config
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.owner import Owner, stalled, unowned_topics

GRACE = 3.0


def test_a_suspect_seen_once_is_only_tracked() -> None:
    since, stuck = stalled({}, {"p.q.a": 0}, now=10.0, grace_s=GRACE)
    assert since == {"p.q.a": (0, 10.0)}
    assert stuck == []


def test_a_suspect_unchanged_for_the_grace_period_is_stuck_and_its_clock_restarts() -> None:
    suspects = {"p.q.a": 0, "p.q.b": 0}
    since, _ = stalled({}, suspects, now=10.0, grace_s=GRACE)
    since, stuck = stalled(since, suspects, now=12.0, grace_s=GRACE)
    assert stuck == []
    since, stuck = stalled(since, suspects, now=13.0, grace_s=GRACE)
    assert stuck == ["p.q.a", "p.q.b"]
    # The rebalance asked for gets its own grace period before the next request.
    since, stuck = stalled(since, {"p.q.a": 0}, now=15.0, grace_s=GRACE)
    assert stuck == []
    assert since == {"p.q.a": (0, 13.0)}


def test_a_suspect_cleared_is_forgotten() -> None:
    since, _ = stalled({}, {"p.q.a": 0}, now=10.0, grace_s=GRACE)
    since, _ = stalled(since, {}, now=12.0, grace_s=GRACE)
    since, stuck = stalled(since, {"p.q.a": 0}, now=14.0, grace_s=GRACE)
    assert stuck == []
    assert since == {"p.q.a": (0, 14.0)}


def test_a_lagging_partition_that_makes_progress_is_not_stuck() -> None:
    key = ("p.q.a", 3)
    since, _ = stalled({}, {key: 0}, now=10.0, grace_s=GRACE)
    since, stuck = stalled(since, {key: 500}, now=14.0, grace_s=GRACE)
    assert stuck == []
    since, stuck = stalled(since, {key: 500}, now=17.0, grace_s=GRACE)
    assert stuck == [key]


@given(
    st.lists(
        st.tuples(st.dictionaries(st.sampled_from("abcd"), st.integers(0, 2)), st.floats(0, 5)),
        min_size=1,
        max_size=20,
    )
)
def test_only_suspects_unchanged_at_every_check_for_the_grace_period_are_stuck(
    checks: list[tuple[dict[str, int], float]],
) -> None:
    since: dict[str, tuple[int, float]] = {}
    now = 0.0
    streak: dict[str, tuple[int, float]] = {}
    for current, step in checks:
        now += step
        streak = {
            k: streak[k] if k in streak and streak[k][0] == m else (m, now)
            for k, m in current.items()
        }
        since, stuck = stalled(since, current, now, GRACE)
        assert set(since) == set(current)
        for key in stuck:
            assert now - streak[key][1] >= GRACE
            streak[key] = (streak[key][0], now)
        assert all(now - streak[k][1] < GRACE for k in current if k not in stuck)


def test_topics_without_an_owner_are_unowned() -> None:
    members = [
        GroupMember("pinledger@a:1", [("p.q.a", 0), ("p.q.a", 1)]),
        GroupMember("pinledger@b:1", [("p.q.b", 0)]),
    ]
    assert unowned_topics({"p.q.a", "p.q.b", "p.q.c"}, members) == {"p.q.c"}


def test_a_group_with_no_members_owns_nothing() -> None:
    """A live server that finds its group empty has dropped out of it: every queue is
    unserved, which the watch must see (it once took this for 'no answer' and waited
    two minutes)."""
    assert unowned_topics({"p.q.a", "p.q.b"}, []) == {"p.q.a", "p.q.b"}


def _owner(clock: FakeClock) -> Owner:
    """An owner that is never started: only its choice of topics is exercised."""
    config = Config.from_env({"PINLEDGER_TOPIC_PREFIX": "p."})
    log = FakeLog(clock)
    return Owner(
        config,
        FakeStore(),
        log,
        LedgerWriter(log, config.topic_prefix),
        Metrics(),
        clock=clock,
    )


def test_the_owner_subscribes_to_the_catalog_and_its_queues() -> None:
    owner = _owner(FakeClock())
    assert owner.wanted_topics() == {"p.catalog"}
    owner.set_queues({"mail", "thumbs"})
    assert owner.wanted_topics() == {"p.catalog", "p.q.mail", "p.q.thumbs"}
    owner.set_queues({"thumbs"})  # mail deleted
    assert owner.wanted_topics() == {"p.catalog", "p.q.thumbs"}


def test_a_queue_just_created_is_owned_before_the_catalog_lists_it() -> None:
    clock = FakeClock()
    owner = _owner(clock)
    owner.set_queues({"mail"})
    owner.add_queue("fresh")
    owner.set_queues({"mail"})  # the catalog has not caught up yet
    assert "p.q.fresh" in owner.wanted_topics()
    owner.set_queues({"mail", "fresh"})
    owner.set_queues({"mail"})  # once listed, the catalog alone decides (deleted again)
    assert "p.q.fresh" not in owner.wanted_topics()


def test_a_created_queue_the_catalog_never_lists_is_let_go() -> None:
    clock = FakeClock()
    owner = _owner(clock)
    owner.add_queue("lost")
    assert "p.q.lost" in owner.wanted_topics()
    clock.advance(31)
    assert owner.wanted_topics() == {"p.catalog"}
