"""Job descriptors `queue:s<partition>:p<priority>:<local_id>`: the only routing
information a PinLater client holds, so they must round-trip exactly and a malformed one
must be a clear client error, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger.descriptor import (
    JOBS_PER_RECORD,
    MAX_NUMBER_DIGITS,
    DescriptorError,
    JobDescriptor,
    local_id_for,
    parse,
)

queue_names = st.from_regex(r"[A-Za-z0-9_]{1,64}", fullmatch=True)
numbers = st.integers(min_value=0, max_value=10**MAX_NUMBER_DIGITS - 1)
offsets = st.integers(min_value=0, max_value=10**15)
indexes = st.integers(min_value=0, max_value=JOBS_PER_RECORD - 1)


def test_descriptor_formats_as_pinlater_does() -> None:
    descriptor = JobDescriptor(queue="emails", partition=3, priority=1, local_id=42_007)
    assert str(descriptor) == "emails:s3:p1:42007"


def test_parse_reads_every_token() -> None:
    assert parse("emails:s3:p1:42007") == JobDescriptor("emails", 3, 1, 42_007)


@given(queue=queue_names, partition=numbers, priority=numbers, local_id=numbers)
def test_format_then_parse_round_trips(
    queue: str, partition: int, priority: int, local_id: int
) -> None:
    descriptor = JobDescriptor(queue, partition, priority, local_id)
    assert parse(str(descriptor)) == descriptor


@given(st.text())
def test_parse_of_any_text_either_succeeds_or_raises_descriptor_error(text: str) -> None:
    try:
        descriptor = parse(text)
    except DescriptorError as exc:
        assert "job descriptor" in str(exc)
    else:
        assert parse(str(descriptor)) == descriptor


def test_leading_zeros_are_read_as_the_same_number() -> None:
    assert parse("q:s007:p01:0042") == JobDescriptor("q", 7, 1, 42)


@given(offset=offsets, index=indexes)
def test_local_id_reads_back_as_offset_and_index(offset: int, index: int) -> None:
    descriptor = JobDescriptor("q", 0, 1, local_id_for(offset, index))
    assert (descriptor.offset, descriptor.index) == (offset, index)


def test_local_id_reads_as_offset_then_index_in_decimal() -> None:
    assert local_id_for(42, 7) == 42_007
    assert local_id_for(0, 0) == 0
    assert local_id_for(1, JOBS_PER_RECORD - 1) == 1999


@pytest.mark.parametrize(
    ("offset", "index", "message"),
    [
        (0, -1, "job index -1 outside 0..999"),
        (0, JOBS_PER_RECORD, "job index 1000 outside 0..999"),
        (-1, 0, "negative offset -1"),
    ],
)
def test_local_id_for_refuses_positions_outside_a_record(
    offset: int, index: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        local_id_for(offset, index)


ONE = "\N{ARABIC-INDIC DIGIT ONE}"
TOKENS = "expected 4: queue:s<partition>:p<priority>:<local_id>"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("", f"has 1 ':'-separated tokens, {TOKENS}", id="empty"),
        pytest.param("q:s0:p1", f"has 3 ':'-separated tokens, {TOKENS}", id="three-tokens"),
        pytest.param("q:s0:p1:5:6", f"has 5 ':'-separated tokens, {TOKENS}", id="five-tokens"),
        pytest.param(":s0:p1:5", "queue name '' must be letters, digits or '_'", id="empty-queue"),
        pytest.param("my-queue:s0:p1:5", "queue name 'my-queue'", id="queue-with-dash"),
        pytest.param("quëue:s0:p1:5", "queue name 'quëue'", id="queue-not-ascii"),
        pytest.param(
            "q:0:p1:5",
            "the partition token '0' should be 's' followed by digits",
            id="missing-s",
        ),
        pytest.param(
            "q:s0:1:5",
            "the priority token '1' should be 'p' followed by digits",
            id="missing-p",
        ),
        pytest.param("q:S0:p1:5", "the partition token 'S0'", id="uppercase-s"),
        pytest.param("q:p0:s1:5", "the partition token 'p0'", id="swapped-prefixes"),
        pytest.param("q:s:p1:5", "the partition token 's'", id="s-without-digits"),
        pytest.param("q:sx:p1:5", "the partition token 'sx'", id="partition-non-digits"),
        pytest.param("q:s0:pone:5", "the priority token 'pone'", id="priority-non-digits"),
        pytest.param(
            "q:s0:p1:abc", "the local id token 'abc' should be digits", id="local-id-letters"
        ),
        pytest.param("q:s0:p1:", "the local id token '' should be digits", id="no-local-id"),
        # str.isdigit() accepts these; int() would read them as numbers.
        pytest.param(f"q:s{ONE}:p1:5", f"the partition token 's{ONE}'", id="arabic-indic-s"),
        pytest.param(f"q:s0:p{ONE}:5", f"the priority token 'p{ONE}'", id="arabic-indic-p"),
        pytest.param(f"q:s0:p1:{ONE}2", f"the local id token '{ONE}2'", id="arabic-indic-id"),
        pytest.param("q:s0:p1:\N{SUPERSCRIPT TWO}", "the local id token '²'", id="superscript"),
        pytest.param("q:s-1:p1:5", "the partition token 's-1'", id="negative-partition"),
        pytest.param("q:s0:p-1:5", "the priority token 'p-1'", id="negative-priority"),
        pytest.param("q:s0:p1:-5", "the local id token '-5'", id="negative-local-id"),
        pytest.param("q:s0:p1:+5", "the local id token '+5'", id="plus-sign"),
        pytest.param("q:s0:p1: 5", "the local id token ' 5'", id="space"),
        pytest.param("q:s0:p1:5\n", "the local id token '5\\n'", id="trailing-newline"),
        pytest.param(
            "q:s0:p1:" + "9" * 20, "the local id has 20 digits, at most 19", id="20-digits"
        ),
        pytest.param(
            "q:s" + "9" * 5000 + ":p1:5",
            "the partition has 5000 digits, at most 19",
            id="beyond-int-conversion-limit",
        ),
    ],
)
def test_malformed_descriptor_is_refused_with_a_message_naming_the_problem(
    text: str, problem: str
) -> None:
    with pytest.raises(DescriptorError) as raised:
        parse(text)
    message = str(raised.value)
    assert problem in message
    assert message.startswith(f"job descriptor {text!r}")


def test_descriptor_error_is_a_value_error() -> None:
    # The service maps ValueError from client input to a client error.
    assert issubclass(DescriptorError, ValueError)


def test_descriptors_sort_by_queue_partition_priority_then_local_id() -> None:
    texts = ["b:s0:p1:1", "a:s1:p1:0", "a:s0:p2:0", "a:s0:p1:9", "a:s0:p1:10"]
    ordered = sorted(parse(text) for text in texts)
    assert [str(d) for d in ordered] == [
        "a:s0:p1:9",
        "a:s0:p1:10",
        "a:s0:p2:0",
        "a:s1:p1:0",
        "b:s0:p1:1",
    ]
