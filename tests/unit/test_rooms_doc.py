"""docs/contributing/rooms.md describes every folder of the repository, and no folder
that is gone: the file index the README kept by hand missed a third of service/'s
modules (issue 40). The page describes rooms, not modules, so only a new or removed
folder asks for an edit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "contributing" / "rooms.md"
# A folder as the page names it: `service/api/`, `.ci/`.
_NAMED = re.compile(r"`(\.?[\w.-]+(?:/[\w.-]+)*)/`")


def _folders() -> set[str]:
    """Every folder holding a file git tracks or would track (committed or not, never an
    ignored one: build/, __pycache__/, site/). A folder that holds only folders
    (deploy/helm/) is described by those."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the folders are git's list")
    return {
        Path(name).parent.as_posix()
        for name in listed
        if Path(name).parent != Path(".") and (ROOT / name).exists()  # not deleted
    }


def _described() -> set[str]:
    return set(_NAMED.findall(PAGE.read_text(encoding="utf-8")))


def test_every_folder_is_described() -> None:
    missing = sorted(_folders() - _described())
    assert missing == [], f"folders docs/contributing/rooms.md does not describe: {missing}"


def test_every_folder_described_exists() -> None:
    gone = sorted(f for f in _described() if not (ROOT / f).is_dir())
    assert gone == [], f"docs/contributing/rooms.md describes folders that are gone: {gone}"
