"""The ids of a job's own trace: derived alike everywhere, distinct per job, attempt and
enqueue, and sampled as the enqueue was."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pinledger.service.observability import job_trace, telemetry

TRACED = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
UNSAMPLED = "00-" + "a" * 32 + "-" + "b" * 16 + "-00"
OTHER_CALL = "00-" + "c" * 32 + "-" + "b" * 16 + "-01"

descriptors = st.from_regex(r"[a-z]{1,8}:s[0-9]:p[0-9]:[0-9]{1,6}", fullmatch=True)
claims = st.text(min_size=1, max_size=30)


@given(descriptors, claims)
def test_the_job_and_its_attempts_share_one_trace_of_their_own(d: str, claim: str) -> None:
    job = telemetry.parse_traceparent(job_trace.job_traceparent(TRACED, d))
    attempt = telemetry.parse_traceparent(job_trace.attempt_traceparent(TRACED, d, claim))
    assert job is not None and attempt is not None
    assert job.trace_id == attempt.trace_id == job_trace.trace_id(TRACED, d)
    assert job.trace_id != int("a" * 32, 16)  # not the enqueue call's trace
    assert job.span_id != attempt.span_id
    assert job.trace_flags.sampled and attempt.trace_flags.sampled


@given(descriptors, descriptors, claims, claims)
def test_ids_differ_between_jobs_and_attempts(d1: str, d2: str, c1: str, c2: str) -> None:
    if d1 != d2:
        assert job_trace.trace_id(TRACED, d1) != job_trace.trace_id(TRACED, d2)
    if c1 != c2:
        assert job_trace.attempt_traceparent(TRACED, d1, c1) != job_trace.attempt_traceparent(
            TRACED, d1, c2
        )


def test_a_recreated_queue_reusing_a_descriptor_gets_another_trace() -> None:
    assert job_trace.trace_id(TRACED, "q:s0:p0:1") != job_trace.trace_id(OTHER_CALL, "q:s0:p0:1")
    # Untraced at enqueue: the export still has an id, from the descriptor alone.
    assert job_trace.trace_id(None, "q:s0:p0:1") == job_trace.trace_id(None, "q:s0:p0:1")


def test_no_context_without_a_traced_enqueue_and_sampling_follows_it() -> None:
    assert job_trace.job_traceparent(None, "q:s0:p0:1") is None
    assert job_trace.attempt_traceparent("garbage", "q:s0:p0:1", "c") is None
    unsampled = telemetry.parse_traceparent(job_trace.job_traceparent(UNSAMPLED, "q:s0:p0:1"))
    assert unsampled is not None and not unsampled.trace_flags.sampled
    assert not job_trace.sampled(UNSAMPLED)
    assert job_trace.sampled(TRACED)
    assert not job_trace.sampled(None)
