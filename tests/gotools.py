"""The Go commands the tests run (Helm, promtool, Jaeger), each built once from the Go
module proxy at a pinned version into the user's cache (bench/gotool.py): a test that
needs one is skipped where Go is missing, and fails where the build does."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import gotool


def built(name: str, module: str, version: str) -> Path:
    """The command `module`@`version` builds, named `name` in the messages."""
    command = module.rsplit("/", 1)[-1]
    target = gotool.cache_root() / "pinledger" / f"{command}-{version}" / command
    try:
        return gotool.built(module, version, target)
    except gotool.GoToolError as exc:
        if str(exc) == gotool.NO_GO:
            pytest.skip(f"{name} is built with Go: {exc}")
        pytest.fail(f"cannot build {name} {version}: {exc}", pytrace=False)
