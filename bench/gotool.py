"""A Go command built once from the Go module proxy at a pinned version, into the
user's cache: River's `river` for the benchmark (bench/river.py), Jaeger for the trace
tests (tests/integration/jaeger.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BUILD_TIMEOUT_S = 1_200


class GoToolError(Exception):
    """The command cannot be built here; the message says why."""


NO_GO = "Go is not installed (no `go` command on PATH)"


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))


def tail(run: subprocess.CompletedProcess[str]) -> str:
    """The last lines a command printed, on one line."""
    return " | ".join((run.stderr or run.stdout).strip().splitlines()[-3:])


def _go(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            args,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GoToolError(f"`{' '.join(args)}` took over {BUILD_TIMEOUT_S} s") from exc


def built(module: str, version: str, target: Path) -> Path:
    """`target`, the command `module`@`version` builds, built on first use. `go install
    MODULE@VERSION` first; if that fails (a module whose go.mod has replace directives,
    or a proxy that serves the version but not the module's version list), the same
    module is built from a scratch module that requires it, which resolves the same
    dependency versions from its go.mod."""
    if target.is_file():
        return target
    go = shutil.which("go")
    if go is None:
        raise GoToolError(NO_GO)
    target.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"building {module}@{version} with Go, once (cached in {target.parent}); this can "
        "take a few minutes",
        file=sys.stderr,
        flush=True,
    )
    env = {**os.environ, "GOBIN": str(target.parent)}
    installed = _go([go, "install", f"{module}@{version}"], target.parent, env)
    if installed.returncode == 0 and target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="pinledger-gotool-") as scratch:
        steps = [
            [go, "mod", "init", "pinledger.gotool/build"],
            [go, "get", f"{module}@{version}"],
            [go, "build", "-o", str(target), module],
        ]
        for step in steps:
            run = _go(step, Path(scratch), env)
            if run.returncode != 0:
                raise GoToolError(
                    f"`go install {module}@{version}` failed ({tail(installed)}); "
                    f"so did `{' '.join(step[1:3])}` ({tail(run)})"
                )
    if not target.is_file():
        raise GoToolError(f"`go build` of {module}@{version} left no {target}")
    return target
