"""`pinledger move-partition`'s arguments: what it refuses before touching anything."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from pinledger.cli.move_partition import _refusal, add_arguments
from pinledger.service.testing.runtime import TEST_CONFIG

MAPPED = dataclasses.replace(TEST_CONFIG, store_shards="/etc/pinledger/shards.json")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--queue", "mail", "--partition", "0"], "give --queue Q --partition P --to SHARD"),
        (["--partition", "0", "--to", "b"], "give --queue Q --partition P --to SHARD"),
        (["--from", "a", "--queue", "mail"], "--from drains a whole shard"),
        ([], "give --queue Q --partition P --to SHARD, or --from SHARD"),
    ],
)
def test_incomplete_or_mixed_arguments_are_refused_with_what_to_give(
    argv: list[str], said: str
) -> None:
    refusal = _refusal(MAPPED, _args(*argv))
    assert refusal is not None and said in refusal


def test_a_move_needs_a_shard_map_and_complete_arguments_pass() -> None:
    whole = _args("--queue", "mail", "--partition", "0", "--to", "b")
    refusal = _refusal(TEST_CONFIG, whole)
    assert refusal is not None and "PINLEDGER_STORE_SHARDS" in refusal
    assert _refusal(MAPPED, whole) is None
    assert _refusal(MAPPED, _args("--from", "a")) is None
    assert _args("--from", "a").settle == 10.0
