"""The alert and recording rules (deploy/prometheus/rules.yml): promtool finds them
valid and their unit tests (deploy/prometheus/tests/*.yml) pass; every alert has a test
in which it fires and one in which it stays silent, and neither an alert that never
fires nor one without its `for:` would pass them; every alert says how bad it is, what
happened and where its runbook is, a section of the manual's alerts page; every series
a rule reads is a metric the server exports, with labels and values it has."""

from __future__ import annotations

import dataclasses
import re
import shutil
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from pinledger import otel
from pinledger.ledger.events import JobEvent
from pinledger.ledger.outcome import Outcome
from pinledger.service.observability.catalogue import CATALOGUE
from tests.deploy import promtool, rules

pytestmark = pytest.mark.deploy

SEVERITIES = {"critical", "warning", "info"}
# Labels a scrape gives every series (rules.yml, its conventions): the cluster's (job,
# and in Kubernetes namespace and service) and the server's (instance, pod, process).
TARGET_LABELS = {"job", "instance", "namespace", "service", "pod", "process"}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


@dataclasses.dataclass(frozen=True)
class Metric:
    type: str
    labels: frozenset[str]


def catalogue() -> dict[str, Metric]:
    """The metrics the server exports, by name (the catalogue in code)."""
    return {spec.name: Metric(spec.kind, frozenset(spec.labels)) for spec in CATALOGUE}


# Label values that have one truth in the code: a rule naming another value would
# match nothing, silently.
LABEL_VALUES: dict[tuple[str, str], set[str]] = {
    ("pinledger_ledger_jobs_total", "outcome"): {o.value for o in Outcome},
    # The owner counts a rejected event under its type's name (ledger_metrics.py).
    ("pinledger_ledger_rejected_total", "action"): {
        event.__name__ for event in typing.get_args(JobEvent)
    },
    ("pinledger_trace_spans_dropped_total", "reason"): {otel.QUEUE_FULL, otel.EXPORT_FAILED},
}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"} | {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
}
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def series_read(expr: str) -> set[str]:
    """The names of the series a PromQL expression reads: every identifier that is not
    a function, a keyword, a label (in braces or a grouping list) or in a string."""
    bare = _STRING.sub('""', expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    bare = _GROUPING.sub(" ", bare)  # `sum without (...) (x)`: sum is then a call
    return {
        name
        for name, call in _IDENTIFIER.findall(bare)
        if not call and name.lower() not in _KEYWORDS
    }


def selectors(expr: str) -> list[tuple[str, str, str, str]]:
    """(series, label, operator, value) of every label matcher of the expression."""
    return [
        (series, label, op, value)
        for series, body in _SELECTOR.findall(expr)
        for label, op, value in _MATCHER.findall(body)
    ]


def metric_of(name: str, known: dict[str, Metric]) -> str | None:
    """The catalogued metric a series name belongs to (a histogram's _bucket...)."""
    if name in known:
        return name
    for suffix in HISTOGRAM_SERIES:
        base = name.removesuffix(suffix)
        if base != name and known.get(base, Metric("", frozenset())).type == "histogram":
            return base
    return None


def sources() -> dict[str, str]:
    """Each recorded series and the one catalogued metric its rule reads."""
    known = catalogue()
    found: dict[str, str] = {}
    for rule in rules.records():
        read = {metric_of(name, known) for name in series_read(rule["expr"])}
        assert len(read) == 1, f"{rule['record']} reads {read}: one metric per recording rule"
        (metric,) = read
        assert metric is not None, f"{rule['record']} reads no catalogued metric"
        found[rule["record"]] = metric
    return found


# -- promtool -------------------------------------------------------------------------


def test_promtool_finds_the_rules_valid() -> None:
    done = promtool.run(["check", "rules", "--lint-fatal", str(rules.RULES)], rules.ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_unit_tests_pass() -> None:
    done = promtool.run(["test", "rules", *map(str, rules.UNIT_TESTS)], rules.ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def _mutated_run(tmp_path: Path, alert: str, change: str) -> str:
    """promtool's unit tests of `alert`, run against rules in which that alert was
    changed; the output when they fail, "" when they pass."""
    groups = rules.groups()
    for group in groups:
        for rule in group["rules"]:
            if rule.get("alert") != alert:
                continue
            if change == "never fires":
                rule["expr"] = f"({rule['expr']}) unless on () vector(1)"
            else:
                del rule["for"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    (tmp_path / "tests").mkdir()
    # Only the files that test it: each file's run evaluates every rule at every step.
    files = [p for p in rules.UNIT_TESTS if f"alertname: {alert}\n" in p.read_text()]
    for path in files:
        shutil.copy(path, tmp_path / "tests" / path.name)
    done = promtool.run(["test", "rules", *[f"tests/{p.name}" for p in files]], tmp_path)
    return "" if done.returncode == 0 else done.stdout + done.stderr


MUTATIONS = [(a["alert"], "never fires") for a in rules.alerts()] + [
    (a["alert"], "fires without waiting its for") for a in rules.alerts() if "for" in a
]


@pytest.mark.parametrize(("alert", "change"), MUTATIONS)
def test_the_unit_tests_fail_on_a_wrong_alert(tmp_path: Path, alert: str, change: str) -> None:
    """An alert that never fires fails its firing test; one that fires at once fails
    the test where a blip shorter than its `for:` stays silent."""
    output = _mutated_run(tmp_path, alert, change)
    assert f"alertname: {alert}," in output, f"{alert} that {change} passes its unit tests"


# -- the unit tests cover every alert ---------------------------------------------------


def _alert_tests() -> list[dict[str, Any]]:
    cases = []
    for path in rules.UNIT_TESTS:
        doc = yaml.safe_load(path.read_text())
        assert doc["rule_files"] == ["../rules.yml"], path.name
        # Groups run in no set order otherwise: an alert might read a recorded series
        # of the previous step.
        assert doc["group_eval_order"] == [g["name"] for g in rules.groups()], path.name
        for group in doc["tests"]:
            cases += group.get("alert_rule_test", [])
    return cases


def test_every_alert_has_a_test_where_it_fires_and_one_where_it_stays_silent() -> None:
    names = {rule["alert"] for rule in rules.alerts()}
    cases = _alert_tests()
    fired = {c["alertname"] for c in cases if c["exp_alerts"]}
    silent = {c["alertname"] for c in cases if not c["exp_alerts"]}
    assert names - fired == set(), "alerts no test sees firing"
    assert names - silent == set(), "alerts no test sees silent"
    assert {c["alertname"] for c in cases} <= names, "tests of alerts that do not exist"


# -- what each alert says ---------------------------------------------------------------


def test_rules_are_named_once_and_recorded_series_by_the_convention() -> None:
    names = [r["alert"] for r in rules.alerts()] + [r["record"] for r in rules.records()]
    assert len(names) == len(set(names))
    for rule in rules.alerts():
        assert re.fullmatch(r"Pinledger[A-Z][A-Za-z]+", rule["alert"]), rule["alert"]
    for rule in rules.records():
        # level:metric:operation, the metric without _total.
        assert re.fullmatch(r"[a-z_]+:pinledger_[a-z_]+:[a-z0-9_]+", rule["record"]), rule
        assert not rule["record"].split(":")[1].endswith("_total"), rule["record"]


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def runbook_sections() -> dict[str, str]:
    """The alerts page's sections: anchor -> the section's text."""
    sections: dict[str, str] = {}
    anchor = ""
    for line in rules.RUNBOOK.read_text().splitlines():
        heading = re.match(r"#{2,3} (.+)", line)
        if heading:
            anchor = slug(heading.group(1))
            sections[anchor] = ""
        elif anchor:
            sections[anchor] += line + "\n"
    return sections


def test_every_alert_says_how_bad_what_and_where_its_runbook_is() -> None:
    sections = runbook_sections()
    for rule in rules.alerts():
        name = rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, name
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, name
        assert notes["runbook_url"] == f"{rules.RUNBOOK_URL}#{name.lower()}", name
        assert name.lower() in sections, f"{name}: no section '## {name}' in {rules.RUNBOOK}"


def test_every_alert_section_of_the_runbook_belongs_to_an_alert() -> None:
    names = {rule["alert"].lower() for rule in rules.alerts()}
    sections = {a for a in runbook_sections() if a.startswith("pinledger")}
    assert sections - names == set(), "runbook sections of alerts that do not exist"
    for anchor in names:
        text = runbook_sections()[anchor]
        for part in ("**What it means.**", "**Likely causes.**", "**Check.**", "**Do.**"):
            assert part in text, f"#{anchor} lacks {part}"


# -- what the rules read ----------------------------------------------------------------


def test_every_series_a_rule_reads_is_exported_or_recorded() -> None:
    known = catalogue()
    recorded = {rule["record"] for rule in rules.records()}
    for rule in rules.alerts() + rules.records():
        name = rule.get("alert") or rule["record"]
        for series in series_read(rule["expr"]):
            assert series == "up" or series in recorded or metric_of(series, known), (
                f"{name} reads {series}: not a metric of the server's catalogue"
            )


def test_every_label_a_rule_matches_is_one_its_metric_has() -> None:
    known = catalogue()
    recorded = sources()
    for rule in rules.alerts() + rules.records():
        name = rule.get("alert") or rule["record"]
        for series, label, op, value in selectors(rule["expr"]):
            if series == "up":
                assert label in TARGET_LABELS, f"{name}: up has no label {label}"
                continue
            metric = recorded.get(series) or metric_of(series, known)
            assert metric is not None, f"{name} reads {series}"
            labels = known[metric].labels
            if labels is not None:
                allowed = labels | TARGET_LABELS | ({"le"} if series.endswith("_bucket") else set())
                assert label in allowed, f"{name}: {metric} has no label {label}"
            values = LABEL_VALUES.get((metric, label))
            if values is not None and op in ("=", "=~"):
                wanted = set(value.split("|")) if op == "=~" else {value}
                assert wanted <= values, f"{name}: {metric} has no {label} {wanted - values}"


def test_the_metric_check_sees_what_a_rule_reads() -> None:
    expr = (
        'sum without (instance, pod) (rate(pinledger_jobs_total{action="timeout"}[5m]))'
        ' > ignoring (action) 0.05 * queue:pinledger_x:rate5m and up{job="pinledger"} == 0'
        " or histogram_quantile(0.99, pinledger_rpc_seconds_bucket) > 1e3"
    )
    assert series_read(expr) == {
        "pinledger_jobs_total",
        "queue:pinledger_x:rate5m",
        "up",
        "pinledger_rpc_seconds_bucket",
    }
    assert selectors(expr) == [
        ("pinledger_jobs_total", "action", "=", "timeout"),
        ("up", "job", "=", "pinledger"),
    ]


def test_the_chart_holds_the_same_rules() -> None:
    assert rules.CHART_COPY.read_text() == rules.RULES.read_text(), (
        f"{rules.CHART_COPY} differs from {rules.RULES}: copy it again"
    )
