"""The scan position's text form, the one format scanJobs' continuation and the
dashboard's page token share (projections/store.py ScanKey)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.projections.store import ScanKey

I64 = 2**63
I32 = 2**31


@given(
    st.integers(-I64, I64 - 1),
    st.integers(0, I32 - 1),
    st.integers(0, I64 - 1),
)
def test_every_key_in_the_columns_ranges_reads_back(run_after: int, part: int, local: int) -> None:
    key = ScanKey(run_after, part, local)
    assert ScanKey.from_token(key.token()) == key


@pytest.mark.parametrize(
    "token",
    [
        "",
        "1.2",
        "1.2.3.4",
        "a.b.c",
        "1..3",
        f"0.{I32}.0",  # partition past integer
        f"0.0.{I64}",  # local id past bigint
        f"{I64}.0.0",
        f"{-I64 - 1}.0.0",
        "0.-1.0",
        "0.0.-1",
    ],
)
def test_any_other_text_is_refused(token: str) -> None:
    with pytest.raises(ValueError):
        ScanKey.from_token(token)
