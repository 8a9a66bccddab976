"""`pinledger --version`: the release and the ledger record format it writes, so that an
operator can tell which servers of a cluster run what during an upgrade."""

from __future__ import annotations

import importlib.metadata

import pytest

from pinledger.cli.main import build_parser
from pinledger.ledger import codec


def test_version_names_the_release_and_the_record_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out.strip()
    release = importlib.metadata.version("pinledger")
    assert printed == (
        f"pinledger {release} (ledger records: codec version {codec.VERSION}; "
        "ledger formats read: 1, 2, 3)"
    )


def test_short_v_stays_verbose() -> None:
    args = build_parser().parse_args(["-v", "migrate"])
    assert args.verbose and args.command == "migrate"
