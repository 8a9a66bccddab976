"""The previous release of pinledger, installed where a test can run it beside the
checkout: the newest `v*` tag before HEAD, built into a wheel from the tagged commit
and installed (without its dependencies: they are the checkout's) into a directory
that goes first on PYTHONPATH. Cached outside the repository, by tag and commit, as
the benchmark caches River."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinledger.service.testing.servers import ROOT

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pinledger" / "releases"


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"git {' '.join(args)} failed: {done.stderr.strip()}", pytrace=False)
    return done.stdout.strip()


def previous_release() -> tuple[str, str]:
    """(tag, commit) of the newest release tag in HEAD's history, other than HEAD
    itself (at a release's own commit, the one before it)."""
    head = _git("rev-parse", "HEAD")
    for attempt in range(2):
        listed = _git("tag", "--merged", "HEAD", "--sort=-v:refname", "--list", "v[0-9]*")
        for tag in listed.split():
            commit = _git("rev-list", "-n", "1", tag)
            if commit != head:
                return tag, commit
        if attempt == 0:
            # A clone made without its tags: ask where it came from, once.
            subprocess.run(
                ["git", "fetch", "--quiet", "--tags", "origin"],
                cwd=ROOT,
                capture_output=True,
                timeout=120,
                check=False,
            )
    pytest.fail(
        "no release tag (v*) in HEAD's history: a clone without tags? Run "
        "`git fetch --tags` (the rolling upgrade test starts the previous release)",
        pytrace=False,
    )


def installed(tag: str, commit: str) -> Path:
    """A directory holding the release's `pinledger` package and its metadata, for
    PYTHONPATH; built on first use."""
    target = CACHE / f"{tag}-{commit[:12]}"
    if (target / "pinledger" / "__init__.py").exists():
        return target
    work = CACHE / f".{tag}-{commit[:12]}.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    source, dist, site = work / "src", work / "dist", work / "site"
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    _pip(tag, "wheel", "-q", "--no-deps", "-w", str(dist), str(source))
    (wheel,) = dist.glob("pinledger-*.whl")
    _pip(tag, "install", "-q", "--no-deps", "--target", str(site), str(wheel))
    if not target.exists():  # another run may have finished first
        site.rename(target)
    shutil.rmtree(work, ignore_errors=True)
    return target


def _pip(tag: str, *args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"building {tag}: {' '.join(command)}:\n{done.stderr[-3000:]}")


def run_with(release: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`pinledger <args>` of the installed release, from `cwd` (outside the checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "pinledger", *args],
        cwd=cwd,
        env={**os.environ, **env, "PYTHONPATH": str(release)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
