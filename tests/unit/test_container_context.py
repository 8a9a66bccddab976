"""The Containerfile builds the wheel from a context that .dockerignore narrows to an
allowlist: every folder pyproject.toml's package-dir maps must be let through, or the
image's wheel would lack it while the checkout's tests pass (the same trap as a
package left out of the wheel: tests/integration/test_wheel.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _allowed() -> set[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return {line[1:] for line in lines if line.startswith("!")}


def test_the_build_context_holds_every_mapped_folder_and_the_build_files() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)
    folders = set(project["tool"]["setuptools"]["package-dir"].values())
    needed = folders | {"pyproject.toml", "setup.py", project["project"]["readme"]}
    assert needed - _allowed() == set(), ".dockerignore leaves out what the wheel needs"
    # Everything else stays out (the tests, the docs, caches, the git history).
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in lines


def test_every_file_the_containerfile_copies_by_name_is_in_the_context() -> None:
    allowed = _allowed()
    for line in (ROOT / "Containerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            for source in words[1:-1]:
                assert source == "." or source in allowed, source
