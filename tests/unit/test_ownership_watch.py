"""The owner's watch for queue topics that no server owns (kafka-python can leave a topic
created during a rebalance out of the assignment; the owner then asks for a rebalance)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from service.owner import stuck_topics

GRACE = 3.0


def test_a_topic_seen_unowned_once_is_only_tracked() -> None:
    since, stuck = stuck_topics({}, {"p.q.a"}, now=10.0, grace_s=GRACE)
    assert since == {"p.q.a": 10.0}
    assert stuck == []


def test_a_topic_unowned_for_the_grace_period_is_stuck_and_its_clock_restarts() -> None:
    since, _ = stuck_topics({}, {"p.q.a", "p.q.b"}, now=10.0, grace_s=GRACE)
    since, stuck = stuck_topics(since, {"p.q.a", "p.q.b"}, now=12.0, grace_s=GRACE)
    assert stuck == []
    since, stuck = stuck_topics(since, {"p.q.a", "p.q.b"}, now=13.0, grace_s=GRACE)
    assert stuck == ["p.q.a", "p.q.b"]
    # The rebalance asked for gets its own grace period before the next request.
    since, stuck = stuck_topics(since, {"p.q.a"}, now=15.0, grace_s=GRACE)
    assert stuck == []
    assert since == {"p.q.a": 13.0}


def test_a_topic_owned_again_is_forgotten() -> None:
    since, _ = stuck_topics({}, {"p.q.a"}, now=10.0, grace_s=GRACE)
    since, _ = stuck_topics(since, set(), now=12.0, grace_s=GRACE)
    since, stuck = stuck_topics(since, {"p.q.a"}, now=14.0, grace_s=GRACE)
    assert stuck == []
    assert since == {"p.q.a": 14.0}


@given(
    st.lists(
        st.tuples(st.frozensets(st.sampled_from("abcd")), st.floats(0, 5)), min_size=1, max_size=20
    )
)
def test_only_topics_unowned_at_every_check_for_the_grace_period_are_stuck(
    checks: list[tuple[frozenset[str], float]],
) -> None:
    since: dict[str, float] = {}
    now = 0.0
    streak_start: dict[str, float] = {}
    for unowned, step in checks:
        now += step
        streak_start = {t: streak_start.get(t, now) for t in unowned}
        since, stuck = stuck_topics(since, set(unowned), now, GRACE)
        assert set(since) == set(unowned)
        for topic in stuck:
            assert now - streak_start[topic] >= GRACE
            streak_start[topic] = now
        assert all(now - streak_start[t] < GRACE for t in unowned if t not in stuck)
