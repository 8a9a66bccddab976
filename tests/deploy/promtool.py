"""promtool, which checks and unit-tests deploy/prometheus/rules.yml: built once from the
Go module proxy at a pinned version (bench/gotool.py, cached outside the repository as
Helm and Jaeger are). Tests skip with a message only where Go is absent; any other
failure to build it fails them. The first build takes minutes (8.5 on the 2-core dev
machine); later runs find the binary in the cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests import gotools

# Prometheus tags its Go module v0.3MM.P for its release 3.MM.P: this is Prometheus
# 3.16.0's promtool.
VERSION = "v0.316.0"
MODULE = "github.com/prometheus/prometheus/cmd/promtool"
RUN_TIMEOUT_S = 120


def binary() -> Path:
    return gotools.built("promtool", MODULE, VERSION)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`promtool ARGS...` in `cwd`; the caller reads its exit status and output."""
    return subprocess.run(
        [str(binary()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
