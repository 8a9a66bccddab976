"""The Grafana dashboard (deploy/grafana/pinledger.json) asks only for what pinledger
exports: every metric its queries name is in the catalogue, as its type is exported (a
histogram through its _bucket, _sum or _count series), with labels the metric has; and it
is a dashboard Grafana imports (a Prometheus datasource variable every query uses, panels
laid out with unique ids)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinledger.service.observability.catalogue import BY_NAME, MetricSpec

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "pinledger.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Labels every series has once scraped (Prometheus's target labels, the supervisor's
# per-process label) or a histogram's bucket bound.
ADDED_LABELS = {"job", "instance", "process"}
SUFFIXES = ("_bucket", "_sum", "_count")
# What the dashboard must show (issue 40): calls and errors, latency, jobs, backlogs,
# the oldest ready job, projection lag, ownership, pauses, dependencies, connections,
# Kafka append latency.
SHOWN = {
    "pinledger_rpc_total",
    "pinledger_rpc_errors_total",
    "pinledger_rpc_seconds",
    "pinledger_jobs_total",
    "pinledger_queue_jobs",
    "pinledger_queue_oldest_ready_seconds",
    "pinledger_projection_lag_records",
    "pinledger_projection_lag_seconds",
    "pinledger_owned_partitions",
    "pinledger_unowned_partitions",
    "pinledger_partition_paused",
    "pinledger_dependency_up",
    "pinledger_connections_open",
    "pinledger_log_append_seconds",
}

_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_METRIC = re.compile(r"(?<![A-Za-z0-9_:])(pinledger_[A-Za-z0-9_:]*)(\{[^}]*\})?")
_MATCHER = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*\"\"\s*")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    for panel in _panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable["query"]["query"]


def metrics_in(expr: str) -> list[tuple[MetricSpec | None, str, set[str]]]:
    """(catalogued metric or None, the name as written, the label names its selector
    matches on) of every `pinledger_` series an expression reads."""
    found = []
    bare = _STRING.sub('""', expr)  # a label value never counts as a name
    for match in _METRIC.finditer(bare):
        name, selector = match.group(1), match.group(2) or "{}"
        base = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)
        spec = BY_NAME.get(name) or BY_NAME.get(base)
        matchers = [m for m in selector[1:-1].split(",") if m.strip()]
        labels = set()
        for matcher in matchers:
            parsed = _MATCHER.fullmatch(matcher)
            assert parsed, f"cannot read the matcher {matcher!r} in {expr}"
            labels.add(parsed.group(1))
        found.append((spec, name, labels))
    return found


def _balanced(expr: str) -> bool:
    depth: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for char in _STRING.sub('""', expr):
        if char in "([{":
            depth.append(char)
        elif char in pairs and (not depth or depth.pop() != pairs[char]):
            return False
    return not depth


QUERIES = list(_queries(_dashboard()))


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_query_names_catalogued_metrics_as_they_are_exported(where: str, expr: str) -> None:
    assert _balanced(expr), f"{where}: unbalanced brackets in {expr}"
    read = metrics_in(expr)
    assert read, f"{where} reads no pinledger metric: {expr}"
    allowed = set(ADDED_LABELS)
    for spec, name, labels in read:
        assert spec is not None, f"{where}: {name} is not in the metrics catalogue"
        if spec.kind == "histogram":
            assert name != spec.name, f"{where}: a histogram is read as _bucket, _sum or _count"
            allowed.add("le")
        else:
            assert name == spec.name, f"{where}: {name} is not how {spec.name} is exported"
        unknown = labels - set(spec.labels) - ADDED_LABELS
        assert not unknown, f"{where}: {spec.name} has no label {sorted(unknown)}"
        allowed |= set(spec.labels)
    for grouping in _GROUPING.findall(_STRING.sub('""', expr)):
        grouped = {label.strip() for label in grouping.split(",") if label.strip()}
        assert grouped <= allowed, f"{where}: no metric of it has {sorted(grouped - allowed)}"


def test_the_dashboard_shows_what_an_operator_needs() -> None:
    read = {spec.name for _, expr in QUERIES for spec, _, _ in metrics_in(expr) if spec}
    assert sorted(SHOWN - read) == []


def test_the_dashboard_is_one_grafana_imports() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "pinledger" and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = list(_panels(dashboard["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["targets"] and panel["description"], panel["title"]
        assert panel["datasource"] == DATASOURCE, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]


def test_a_query_naming_something_not_exported_is_caught() -> None:
    """The check itself: a made-up metric, a histogram read bare, a label the metric
    lacks, a grouping by it."""
    assert metrics_in("rate(pinledger_made_up_total[5m])")[0][0] is None
    ((spec, name, _),) = metrics_in("rate(pinledger_rpc_seconds[5m])")
    assert spec is not None and spec.kind == "histogram" and name == spec.name
    ((spec, _, labels),) = metrics_in('pinledger_owned_partitions{queue=~"a"}')
    assert spec is not None and labels - set(spec.labels) == {"queue"}
    assert _GROUPING.findall("max by (queue) (pinledger_owned_partitions)") == ["queue"]
    assert not _balanced("sum(rate(pinledger_rpc_total[5m])")
