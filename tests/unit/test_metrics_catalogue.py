"""The metrics catalogue (service/observability/catalogue.py) is well formed, lists every
metric name the code records, and lists none the code never records.

The registry refuses an uncatalogued name at the call (test_metrics.py); this reads the
source, so that a name on a path no unit test runs is caught too. The live scrape
(tests/integration/test_metrics_scrape.py) checks the same against a real server."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pinledger.client.worker.metrics import NAMES as WORKER_NAMES
from pinledger.service.observability import catalogue
from pinledger.service.observability.catalogue import BY_NAME, CATALOGUE, spec
from tests.source_folders import FOLDERS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (*FOLDERS, "pinledger")
CATALOGUE_FILE = ROOT / "service" / "observability" / "catalogue.py"
NAME = re.compile(r"pinledger_[a-z0-9_]*[a-z0-9]")
# Strings that look like metric names and are not.
NOT_METRICS = {
    "pinledger_closes_on_failure": "an attribute kafka-python's patches set",
    "pinledger_no_repr": "an attribute kafka-python's patches set",
    "pinledger_import": "the PinLater importer's bookkeeping table",
    "pinledger_session": "the dashboard's session cookie",
}
UNITS = {
    "",
    "calls",
    "connections",
    "events",
    "jobs",
    "partitions",
    "records",
    "seconds",
    "spans",
    "ticks",
}


def _is_docstring(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    return isinstance(parents.get(node), ast.Expr)


def _strings() -> list[tuple[Path, str, bool]]:
    """Every string constant of the package's code: (file, text, is a docstring or a
    bare string statement)."""
    found = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            parents = {
                child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.append((path, node.value, _is_docstring(node, parents)))
    return found


def test_every_metric_name_in_the_code_is_catalogued() -> None:
    """Any `pinledger_...` name in a string of the code (docstrings too: a comment
    naming a metric that does not exist misleads as much) is a catalogued metric: the
    server's, or the worker runner's (client/worker/metrics.py)."""
    unknown = {
        f"{name} ({path.relative_to(ROOT)})"
        for path, text, _ in _strings()
        if path != CATALOGUE_FILE
        for name in NAME.findall(text)
        if name not in BY_NAME and name not in NOT_METRICS and name not in WORKER_NAMES
    }
    assert not unknown, (
        "metric names not in service/observability/catalogue.py: add them there with "
        f"their type, labels and help: {sorted(unknown)}"
    )


def _constants_used() -> set[str]:
    """The metric names whose catalogue constant the code outside the catalogue names
    (`catalogue.JOBS_TOTAL`)."""
    by_constant = {
        constant: value
        for constant, value in vars(catalogue).items()
        if isinstance(value, str) and value in BY_NAME
    }
    used = set()
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == CATALOGUE_FILE:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "catalogue"
                    and node.attr in by_constant
                ):
                    used.add(by_constant[node.attr])
    return used


def test_every_catalogued_metric_is_recorded_somewhere() -> None:
    """Each metric's constant is named in code other than the catalogue: a catalogued
    metric nothing records is a lie in the manual."""
    assert sorted(set(BY_NAME) - _constants_used()) == []


def test_code_names_a_metric_by_its_constant_never_by_a_string() -> None:
    """A metric name written as a string outside the catalogue is a second copy of it,
    which a rename would miss; docstrings may name metrics (the first test holds them to
    the catalogue)."""
    written = sorted(
        f"{text} ({path.relative_to(ROOT)})"
        for path, text, docstring in _strings()
        if path != CATALOGUE_FILE and not docstring and text in BY_NAME
    )
    assert written == [], "use service/observability/catalogue.py's constants"


def test_the_catalogue_is_well_formed() -> None:
    names = [metric.name for metric in CATALOGUE]
    assert len(names) == len(set(names)), "a metric is catalogued twice"
    for metric in CATALOGUE:
        where = metric.name
        assert NAME.fullmatch(metric.name), where
        assert metric.name.endswith("_total") == (metric.kind == "counter"), where
        assert metric.unit in UNITS, where
        if metric.unit == "seconds":
            assert metric.name.endswith("_seconds"), where
        assert len(set(metric.labels)) == len(metric.labels), where
        for label in metric.labels:
            assert re.fullmatch(r"[a-z][a-z_]*", label) and label not in ("le", "process"), where
        # Prometheus text has one HELP line per family; the manual shows it in a table.
        assert metric.help.endswith(".") and "\n" not in metric.help, where
        assert spec(metric.name) is metric


def test_an_uncatalogued_name_is_named_in_the_error() -> None:
    try:
        spec("pinledger_nothing")
    except KeyError as exc:
        assert "service/observability/catalogue.py" in str(exc)
    else:
        raise AssertionError("no KeyError")
