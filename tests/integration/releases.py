"""The previous release of pinledger, installed where a test can run it beside the
checkout: the newest release before HEAD (releases.txt), built into a wheel from its commit
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


LISTED = Path(__file__).with_name("releases.txt")


def _git(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    if check and done.returncode != 0:
        pytest.fail(f"git {' '.join(args)} failed: {done.stderr.strip()}", pytrace=False)
    return done


def listed_releases() -> list[tuple[str, str]]:
    """(tag, commit) of each release in releases.txt, newest first."""
    lines = LISTED.read_text().splitlines()
    return [
        (tag, commit)
        for tag, commit in (line.split() for line in lines if line and not line.startswith("#"))
    ]


def _has(commit: str) -> bool:
    return _git("cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0


def previous_release() -> tuple[str, str]:
    """(tag, commit) of the newest listed release in HEAD's history, other than HEAD
    itself (at a release's own commit, the one before it). Tags this clone has must be
    listed, with the same commit, so the list cannot fall behind the releases."""
    listed = dict(listed_releases())
    tags = _git("tag", "--merged", "HEAD", "--list", "v[0-9]*").stdout.split()
    for tag in tags:
        commit = _git("rev-list", "-n", "1", tag).stdout.strip()
        if listed.get(tag) != commit:
            pytest.fail(
                f"release {tag} ({commit[:12]}) is not in {LISTED.name} as `{tag} {commit}`: "
                "add it there (newest first)",
                pytrace=False,
            )
    head = _git("rev-parse", "HEAD").stdout.strip()
    shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    for tag, commit in listed_releases():
        if commit == head:
            continue
        if not shallow:
            if _git("merge-base", "--is-ancestor", commit, head, check=False).returncode == 0:
                return tag, commit
            continue
        # A shallow clone cannot tell what is in HEAD's history: the newest listed
        # release is the previous one. Fetch its commit from where the clone came from.
        if not _has(commit):
            _git("fetch", "--quiet", "--depth=1", "origin", commit, check=False)
        if _has(commit):
            return tag, commit
        pytest.fail(
            f"{tag}'s commit {commit[:12]} is not in this shallow clone and could not be "
            "fetched: run `git fetch --unshallow` (the rolling upgrade test builds the "
            "previous release from it)",
            pytrace=False,
        )
    pytest.fail(f"no release of {LISTED.name} is in HEAD's history", pytrace=False)


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
