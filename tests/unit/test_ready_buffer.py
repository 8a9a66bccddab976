"""The ready buffers: what a dequeue gets, in which order, and never twice."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.state import Job, JobState
from pinledger.service.ownership.ready_buffer import ReadyBuffer, take
from tests.unit.factories import CLAIM, NOW, WORKER, make_job


def pending(local_id: int, priority: int = 1, run_after: int = NOW - 1000) -> Job:
    return make_job(local_id=local_id, priority=priority, run_after=run_after)


def buffer_with(*jobs: Job) -> ReadyBuffer:
    buffer = ReadyBuffer(max_priority=3)
    buffer.load(jobs)
    return buffer


def ids(taken: Sequence[tuple[int, Job]]) -> list[int]:
    return [job.local_id for _, job in taken]


def test_highest_priority_first_then_earliest_run_after() -> None:
    buffer = buffer_with(
        pending(1, priority=3, run_after=NOW - 9000),
        pending(2, priority=1, run_after=NOW - 10),
        pending(3, priority=1, run_after=NOW - 500),
        pending(4, priority=2, run_after=NOW - 9000),
    )
    assert ids(take([buffer], NOW, 10)) == [3, 2, 4, 1]


def test_future_jobs_wait_and_limit_is_respected() -> None:
    buffer = buffer_with(pending(1), pending(2), pending(3, run_after=NOW + 1))
    assert ids(take([buffer], NOW, 1)) == [1]
    assert ids(take([buffer], NOW, 10)) == [2]  # 1 is reserved, 3 is not due
    assert ids(take([buffer], NOW + 1, 10)) == [3]


def test_reserved_jobs_come_back_only_when_released() -> None:
    buffer = buffer_with(pending(1))
    assert ids(take([buffer], NOW, 5)) == [1]
    assert take([buffer], NOW, 5) == []
    buffer.release([1])
    assert ids(take([buffer], NOW, 5)) == [1]


def test_a_projected_claim_ends_the_reservation_and_a_rejected_one_frees_the_job() -> None:
    job = pending(1)
    buffer = buffer_with(job)
    take([buffer], NOW, 1)
    claimed = make_job(JobState.IN_PROGRESS, local_id=1)
    buffer.update({1: claimed}, claimed={1})
    assert take([buffer], NOW, 1) == []
    # A claim the log rejected leaves the job PENDING: it is offered again.
    other = buffer_with(job)
    take([other], NOW, 1)
    other.update({1: job}, claimed={1})
    assert ids(take([other], NOW, 1)) == [1]


def test_jobs_failed_back_to_pending_are_offered_again_and_finished_ones_never() -> None:
    buffer = buffer_with(pending(1), pending(2))
    take([buffer], NOW, 2)
    buffer.update({i: make_job(JobState.IN_PROGRESS, local_id=i) for i in (1, 2)}, claimed={1, 2})
    buffer.update(
        {
            1: make_job(JobState.PENDING, local_id=1, run_after=NOW + 10),
            2: make_job(JobState.SUCCEEDED, local_id=2),
        },
        claimed=(),
    )
    assert take([buffer], NOW, 5) == []
    assert ids(take([buffer], NOW + 10, 5)) == [1]
    assert len(buffer) == 1


def test_take_merges_partitions_in_priority_order() -> None:
    first = buffer_with(pending(10, priority=2), pending(11, priority=1, run_after=NOW - 5))
    second = buffer_with(pending(20, priority=1, run_after=NOW - 50), pending(21, priority=3))
    taken = take([first, second], NOW, 10)
    assert [(index, job.local_id) for index, job in taken] == [(1, 20), (0, 11), (0, 10), (1, 21)]


def test_dry_run_shows_due_jobs_without_reserving() -> None:
    buffer = buffer_with(pending(1, priority=2), pending(2), pending(3, run_after=NOW + 5))
    assert [j.local_id for j in buffer.due(NOW, 10)] == [2, 1]
    assert ids(take([buffer], NOW, 10)) == [2, 1]


jobs_strategy = st.lists(
    st.tuples(
        st.integers(1, 3),  # priority
        st.integers(-5, 5),  # run_after offset from NOW
        st.sampled_from([JobState.PENDING, JobState.IN_PROGRESS, JobState.SUCCEEDED]),
    ),
    max_size=40,
)


@given(jobs_strategy, st.lists(st.integers(0, 8), max_size=8))
def test_takes_never_repeat_a_job_and_follow_the_order(
    specs: list[tuple[int, int, JobState]], limits: list[int]
) -> None:
    buffer = ReadyBuffer(max_priority=3)
    jobs = []
    for local_id, (priority, offset, state) in enumerate(specs):
        in_progress = state is JobState.IN_PROGRESS
        jobs.append(
            make_job(
                state,
                local_id=local_id,
                priority=priority,
                run_after=NOW + offset,
                claim=CLAIM if in_progress else None,
                claim_source=WORKER if in_progress else None,
                touched_at=NOW if in_progress else None,
            )
        )
    buffer.update({job.local_id: job for job in jobs})
    taken: list[int] = []
    for limit in limits:
        batch = [job for _, job in take([buffer], NOW, limit)]
        assert len(batch) <= limit
        keys = [(job.priority, job.run_after) for job in batch]
        assert keys == sorted(keys)
        taken += [job.local_id for job in batch]
    assert len(taken) == len(set(taken))
    due = {j.local_id for j in jobs if j.state is JobState.PENDING and j.run_after <= NOW}
    assert set(taken) <= due
    if sum(limits) >= len(due):
        assert set(taken) == due


# -- the window: a bounded prefix of Postgres's PENDING jobs ------------------------------


class _Projection:
    """The partition's PENDING jobs as Postgres holds them, and the refills an owner
    reads from there (what ready_jobs answers)."""

    def __init__(self) -> None:
        self.pending: dict[int, Job] = {}

    def refill(self, buffer: ReadyBuffer) -> None:
        for priority, after, room in buffer.wants():
            found = sorted(
                (j for j in self.pending.values() if j.priority == priority),
                key=lambda j: (j.run_after, j.local_id),
            )
            found = [j for j in found if (j.run_after, j.local_id) > after][:room]
            assert buffer.fill(priority, after, found, room)

    def next_due(self, now: int) -> int | None:
        due = [(j.priority, j.run_after, j.local_id) for j in self.pending.values()]
        due = [key for key in due if key[1] <= now]
        return min(due)[2] if due else None


def _claim(projection: _Projection, buffer: ReadyBuffer, job: Job) -> None:
    """The claim of a taken job projected."""
    del projection.pending[job.local_id]
    claimed = make_job(JobState.IN_PROGRESS, local_id=job.local_id, priority=job.priority)
    buffer.update({job.local_id: claimed}, claimed={job.local_id})


window_ops = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.integers(1, 3), st.integers(-5, 5)),
        st.tuples(st.just("take"), st.integers(1, 4), st.integers(-5, 5)),
        st.tuples(st.just("release"), st.integers(1, 4), st.integers(-5, 5)),
        st.tuples(st.just("retry"), st.integers(1, 3), st.integers(-5, 5)),
    ),
    max_size=60,
)


@given(window_ops, st.integers(3, 9))
def test_a_window_serves_the_backlog_in_order_within_its_capacity(
    ops: list[tuple[str, int, int]], capacity: int
) -> None:
    projection = _Projection()
    # Some jobs were there before the owner: only in Postgres.
    for local_id in range(8):
        projection.pending[local_id] = pending(local_id, 1 + local_id % 3, NOW + local_id % 4 - 2)
    buffer = ReadyBuffer(max_priority=3, capacity=capacity, from_store=True)
    next_id = 100
    claimed: list[Job] = []
    for op, a, b in ops:
        projection.refill(buffer)
        if op == "enqueue" or (op == "retry" and not claimed):
            job = pending(next_id, a, NOW + b)
            next_id += 1
            projection.pending[job.local_id] = job
            buffer.update({job.local_id: job})
        elif op == "retry":
            # A claimed job failed with attempts left: PENDING again, later.
            back = pending(claimed.pop().local_id, a, NOW + b)
            projection.pending[back.local_id] = back
            buffer.update({back.local_id: back})
        else:
            for _ in range(a):
                expected = projection.next_due(NOW)
                taken = take([buffer], NOW, 1)
                # The window hands out exactly what a scan of Postgres would.
                assert [job.local_id for _, job in taken] == (
                    [] if expected is None else [expected]
                )
                if not taken:
                    break
                if op == "release":
                    buffer.release([taken[0][1].local_id])
                else:
                    _claim(projection, buffer, taken[0][1])
                    claimed.append(taken[0][1])
                projection.refill(buffer)
        # Memory: never more ready jobs than the capacity, whatever the backlog.
        assert len(buffer) <= capacity
    # Draining: everything due comes out, in order.
    while (expected := projection.next_due(NOW)) is not None:
        projection.refill(buffer)
        [(_, job)] = take([buffer], NOW, 1)
        assert job.local_id == expected
        _claim(projection, buffer, job)
