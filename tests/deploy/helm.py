"""Helm, which the chart's tests render deploy/helm/pinledger with: built once from the
Go module proxy at a pinned version (bench/gotool.py, cached outside the repository as
Jaeger is) and run with its own empty configuration, no cluster. Tests skip with a
message only where Go is absent; any other failure to build it fails them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests import gotools

VERSION = "v3.22.0"
MODULE = "helm.sh/helm/v3/cmd/helm"
CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "pinledger"
VALUES = CHART / "ci"
# A `go install`ed Helm has no Kubernetes version linked in and assumes 1.20, below the
# chart's kubeVersion: the tests name one (any the chart supports renders the same).
KUBE_VERSION = "1.30.0"
RELEASE = "pl"
NAMESPACE = "jobs"
RUN_TIMEOUT_S = 120


def binary() -> Path:
    return gotools.built("Helm", MODULE, VERSION)


class HelmError(Exception):
    """helm exited non-zero; the message is what it printed."""


def run(args: list[str], chart: Path = CHART) -> str:
    """`helm ARGS... CHART`, with Helm's own files in a scratch folder: nothing read
    from or written to the user's Helm configuration, no cluster asked."""
    with tempfile.TemporaryDirectory(prefix="pinledger-helm-") as home:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
            "KUBECONFIG": f"{home}/kubeconfig",
        }
        done = subprocess.run(
            [str(binary()), *args, str(chart)],
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        raise HelmError((done.stderr or done.stdout).strip())
    return done.stdout


def value_args(
    values: Iterable[Path] = (),
    sets: Mapping[str, str] | None = None,
    set_json: Mapping[str, Any] | None = None,
) -> list[str]:
    args: list[str] = []
    for path in values:
        args += ["--values", str(path)]
    for name, value in (sets or {}).items():
        args += ["--set", f"{name}={value}"]
    for name, data in (set_json or {}).items():
        args += ["--set-json", f"{name}={json.dumps(data)}"]
    return args


def template(
    values: Iterable[Path] = (),
    sets: Mapping[str, str] | None = None,
    chart: Path = CHART,
    set_json: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The manifests `helm template` renders, parsed."""
    out = run(
        [
            "template",
            RELEASE,
            "--namespace",
            NAMESPACE,
            "--kube-version",
            KUBE_VERSION,
            *value_args(values, sets, set_json),
        ],
        chart,
    )
    return [doc for doc in yaml.safe_load_all(out) if doc]


def lint(values: Iterable[Path] = ()) -> str:
    return run(["lint", "--strict", "--kube-version", KUBE_VERSION, *value_args(values)])


def notes(values: Iterable[Path] = (), sets: Mapping[str, str] | None = None) -> str:
    """NOTES.txt as an install prints it. `helm template` leaves NOTES out and an
    install wants a cluster, so a copy of the chart renders it into a manifest."""
    with tempfile.TemporaryDirectory(prefix="pinledger-chart-") as scratch:
        chart = Path(scratch) / CHART.name
        shutil.copytree(CHART, chart)
        (chart / "templates" / "zz-notes.yaml").write_text(
            'notes: |\n{{ include "pinledger/templates/NOTES.txt" . | indent 2 }}\n'
        )
        (doc,) = [d for d in template(values, sets, chart) if "notes" in d]
    return str(doc["notes"])
