"""deploy/prometheus/rules.yml as the tests read it: its alerts and recording rules, the
promtool unit tests beside it, the Helm chart's copy, and the manual's alerts page its
runbook_urls point into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
UNIT_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))
# Helm reads no file outside the chart: the chart holds a copy, held identical.
CHART_COPY = ROOT / "deploy" / "helm" / "pinledger" / "files" / "prometheus-rules.yml"
RUNBOOK = ROOT / "docs" / "operations" / "alerts.md"
# Where the manual is served (MkDocs' site_url), and the alerts page in it
# (docs/operations/alerts.md). The chart replaces MANUAL_URL with
# prometheusRule.runbookBaseUrl.
MANUAL_URL = "https://pinledger.dev"
RUNBOOK_URL = f"{MANUAL_URL}/operations/alerts/"

Rule = dict[str, Any]


def groups() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["groups"]
    return found


def alerts() -> list[Rule]:
    return [rule for group in groups() for rule in group["rules"] if "alert" in rule]


def records() -> list[Rule]:
    return [rule for group in groups() for rule in group["rules"] if "record" in rule]
