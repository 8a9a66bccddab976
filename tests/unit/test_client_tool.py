"""The pure parts of `pinledger client`: percentiles, the bounded latency histogram,
argument parsing and validation, and the one-line error messages."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.cli.load_run import Tickets
from pinledger.cli.load_stats import Histogram, Window, percentile, window_rates
from pinledger.cli.tool import main
from pinledger.cli.tool_options import Options, UsageError, parse_options
from pinledger.cli.tool_text import error_line
from pinledger.client.client import PinLaterClient
from pinledger.client.errors import ErrorCode, PinLaterError, ServerUnavailableError
from pinledger.client.jobs import JobState


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([], 50, 0.0),
        ([7.0], 99, 7.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 51, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([float(i) for i in range(1, 101)], 90, 90.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == expected


@given(st.lists(st.floats(min_value=1e-5, max_value=60.0), min_size=1, max_size=300))
def test_histogram_percentiles_are_at_most_one_percent_high(values: list[float]) -> None:
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    ordered = sorted(values)
    for p in (50, 90, 99, 100):
        exact = percentile(ordered, p)
        approx = histogram.percentile(p)
        assert exact * (1 - 1e-9) <= approx <= exact * 1.01 + 1e-12
    assert histogram.max == max(values)


def test_histogram_memory_stays_bounded() -> None:
    histogram = Histogram()
    rng = random.Random(3)
    for _ in range(100_000):
        histogram.add(rng.uniform(0.0005, 0.05))
    assert histogram.count == 100_000
    # 1 % buckets between 0.5 ms and 50 ms: log(100)/log(1.01) ~ 463 buckets.
    assert len(histogram.buckets) < 500


def test_window_rates_per_second_and_in_milliseconds() -> None:
    window = Window(calls=4, jobs=40, errors=1, latencies=[0.004, 0.001, 0.002, 0.003])
    rates = window_rates(window, 2.0)
    assert (rates.calls_per_s, rates.jobs_per_s) == (2.0, 20.0)
    assert (rates.p50_ms, rates.p90_ms, rates.p99_ms) == (2.0, 4.0, 4.0)
    assert "jobs/s      20.0" in rates.line() and "errors 1" in rates.line()


def test_tickets_share_num_queries_and_minus_one_never_ends() -> None:
    tickets = Tickets(3)
    assert [tickets.take() for _ in range(5)] == [True, True, True, False, False]
    endless = Tickets(-1)
    assert all(endless.take() for _ in range(10_000))


def test_options_take_pinlater_flags() -> None:
    o = parse_options(
        [
            "--host",
            "example",
            "--port",
            "9011",
            "--mode",
            "get_job_count",
            "--queue",
            "q",
            "--job_state",
            "3",
            "--priority",
            "2",
            "--count_future_jobs",
            "true",
        ]
    )
    assert (o.mode, o.host, o.port, o.queue) == ("get_job_count", "example", 9011, "q")
    assert (o.job_state, o.priority, o.count_future_jobs) == (JobState.FAILED, 2, True)
    # PinLater's defaults.
    o = parse_options(["enqueue", "--queue", "q"])
    assert (o.concurrency, o.batch_size, o.num_queries, o.dequeue_success_percent) == (
        1,
        1,
        1,
        100,
    )
    assert (o.job_state, o.count_future_jobs, o.priority) == (JobState.PENDING, False, None)


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("0", JobState.PENDING),
        ("in_progress", JobState.IN_PROGRESS),
        ("SUCCEEDED", JobState.SUCCEEDED),
    ],
)
def test_job_state_by_number_or_name(text: str, state: JobState) -> None:
    assert parse_options(["scan", "--queue", "q", "--job_state", text]).job_state is state


def test_job_descriptors_repeat_or_comma_separate() -> None:
    o = parse_options(
        ["lookup", "--job_descriptor", "a:s0:p1:1,a:s0:p1:2", "--job_descriptor", "b:s1:p2:3"]
    )
    assert o.job_descriptors == ["a:s0:p1:1", "a:s0:p1:2", "b:s1:p2:3"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "no mode given"),
        (["explode", "--queue", "q"], "unknown mode 'explode'"),
        (["enqueue", "--mode", "dequeue", "--queue", "q"], "two modes given"),
        (["enqueue"], "--queue is required for mode enqueue"),
        (["lookup"], "--job_descriptor is required"),
        (["enqueue", "--queue", "q", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["enqueue", "--queue", "q", "--batch_size", "0"], "--batch_size must be at least 1"),
        (["enqueue", "--queue", "q", "--num_queries", "0"], "-1 for no end"),
        (["enqueue", "--queue", "q", "--num_queries", "-2"], "-1 for no end"),
        (["dequeue", "--queue", "q", "--dequeue_success_percent", "-1"], "0-100"),
        (["enqueue", "--queue", "q", "--priority", "0"], "--priority must be at least 1"),
        (["enqueue", "--queue", "q", "--port", "70000"], "--port must be 1-65535"),
        (["scan", "--queue", "q", "--limit", "0"], "--limit must be at least 1"),
        (["retry_failed", "--queue", "q", "--attempts", "0"], "--attempts must be at least 1"),
        (["enqueue", "--queue", "q", "--delay_ms", "-5"], "--delay_ms must not be negative"),
    ],
)
def test_arguments_that_cannot_work_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_options(argv)


def test_get_queue_names_needs_no_queue() -> None:
    assert parse_options(["get_queue_names"]).queue is None


@pytest.mark.parametrize(
    "argv",
    [["scan", "--queue", "q", "--job_state", "DONE"], ["scan", "--count_future_jobs", "maybe"]],
)
def test_unparseable_values_exit_2_with_argparse_message(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_options(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unknown job state 'DONE'" in err or "expected true or false" in err


def test_main_reports_usage_errors_in_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def never(_: Options) -> PinLaterClient:
        raise AssertionError("no connection for bad arguments")

    assert main(["enqueue", "--queue", "q", "--batch_size", "-3"], connector=never) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pinledger client: --batch_size must be at least 1, got -3"]


def test_error_lines_name_the_error_code_and_the_server() -> None:
    error = PinLaterError(ErrorCode.QUEUE_NOT_FOUND, "queue 'x' does not exist", "h:9010")
    assert error_line(error) == "QUEUE_NOT_FOUND: queue 'x' does not exist (from h:9010)"


def test_unreachable_servers_are_listed_once() -> None:
    failure = "h:1: cannot connect: refused"
    error = ServerUnavailableError(
        f"no server could serve the call after 3 rounds: {failure}; {failure}; {failure}"
    )
    assert error_line(error) == (
        "cannot reach the server: no server could serve the call after 3 rounds: "
        f"{failure} (is `pinledger serve` running there?)"
    )
