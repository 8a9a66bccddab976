"""Dequeue rate limits as PinLater users know them, on a fake clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pinledger.service.api.ratelimit import QueueRateLimits, RateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def dequeue(limiter: RateLimiter, jobs: int = 1) -> bool:
    """What the server does: ask, then charge what was handed out."""
    if not limiter.allow():
        return False
    limiter.charge(jobs)
    return True


def test_half_a_job_per_second_is_one_job_every_two_seconds() -> None:
    clock = FakeClock()
    limiter = RateLimiter(0.5, clock)
    served = []
    for step in range(20):  # every 0.5 s for 10 s
        clock.now = 1000.0 + step * 0.5
        if dequeue(limiter):
            served.append(clock.now - 1000.0)
    assert served == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_steady_worker_at_the_rate_is_never_refused() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10, clock)
    for _ in range(1000):
        assert dequeue(limiter)
        clock.now += 0.1  # float steps do not sum exactly; still never refused


def test_big_batch_puts_the_limiter_in_debt() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2, clock)
    assert dequeue(limiter, jobs=20)  # a batch is never cut short...
    clock.now += 9.0
    assert not limiter.allow()  # ...but 18 jobs of debt take 9.5 s to work off
    clock.now += 0.5
    assert limiter.allow()


def test_idle_time_saves_only_a_small_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(1, clock)
    clock.now += 3600
    assert dequeue(limiter)
    assert not limiter.allow()


def test_paused_queue_refuses_every_dequeue() -> None:
    clock = FakeClock()
    limits = QueueRateLimits(clock)
    limits.set_rates({"paused": 0.0})
    limits.set_shares({"paused": 1 / 3})
    for _ in range(5):
        assert not limits.allow("paused")
        clock.now += 3600
    assert limits.rate("paused") == 0.0


def test_unlisted_queue_is_unlimited() -> None:
    limits = QueueRateLimits(FakeClock())
    limits.set_rates({"slow": 1.0})
    limits.charge("fast", 10**6)
    assert limits.allow("fast")
    assert limits.rate("fast") is None


def test_a_servers_share_of_the_rate_is_its_share_of_the_partitions() -> None:
    limits = QueueRateLimits(FakeClock())
    limits.set_rates({"q": 10.0})
    assert limits.rate("q") == 10.0  # no membership yet: act as the only one
    limits.set_shares({"q": 0.25})
    assert limits.rate("q") == 2.5


def test_a_server_owning_none_of_a_queue_holds_back_only_a_paused_one() -> None:
    # It claims none of the queue's jobs (the owners charge them): its limiter, never
    # charged, only gates the dequeues it receives and forwards.
    clock = FakeClock()
    limits = QueueRateLimits(clock)
    limits.set_shares({"q": 0.0, "paused": 0.0})
    limits.set_rates({"q": 1.0, "paused": 0.0})
    for _ in range(5):
        assert limits.allow("q")
        assert not limits.allow("paused")
        limits.charge("q", 0)


def test_reconfigure_keeps_debt() -> None:
    clock = FakeClock()
    limits = QueueRateLimits(clock)
    limits.set_rates({"q": 1.0, "r": 1.0})
    limits.charge("q", 100)
    limits.set_rates({"q": 1.0, "r": 5.0})  # q unchanged
    assert not limits.allow("q")
    limits.set_rates({"q": 2.0})
    limits.set_shares({"q": 0.5})  # same share
    assert not limits.allow("q")
    limits.set_rates({"q": 8.0})  # new share: debt still owed, paid faster
    clock.now += 24.0
    assert not limits.allow("q")
    clock.now += 1.0
    assert limits.allow("q")


def test_queue_dropped_from_config_becomes_unlimited() -> None:
    limits = QueueRateLimits(FakeClock())
    limits.set_rates({"q": 0.0})
    limits.set_rates({})
    assert limits.allow("q")


@given(
    rate=st.floats(min_value=0.01, max_value=1000),
    steps=st.lists(
        st.tuples(st.floats(min_value=0, max_value=5), st.integers(min_value=1, max_value=50)),
        max_size=200,
    ),
)
def test_never_more_than_rate_times_time_plus_burst(
    rate: float, steps: list[tuple[float, int]]
) -> None:
    """Over the whole schedule, jobs handed out <= rate*t + burst, plus what the last
    batch overshot (a batch is charged after it is handed out, never cut short)."""
    clock = FakeClock()
    limiter = RateLimiter(rate, clock)
    start, handed_out, biggest = clock.now, 0, 1
    for wait, batch in steps:
        clock.now += wait
        if dequeue(limiter, batch):
            handed_out += batch
            biggest = max(biggest, batch)
    elapsed = clock.now - start
    assert handed_out <= rate * elapsed + max(1.0, rate) + (biggest - 1) + 1e-6
    # and with one job per dequeue, the plain bound holds
    clock2 = FakeClock()
    single = RateLimiter(rate, clock2)
    ones = 0
    for wait, _ in steps:
        clock2.now += wait
        ones += dequeue(single)
    assert ones <= rate * (clock2.now - 1000.0) + max(1.0, rate) + 1e-6
