"""One import name: code names its modules `pinledger.<room>...`, never by the folder
(docs/decisions/0009-package-layout.md).

The rooms are top-level folders with an `__init__.py`, so from the repository root
`import ledger.state` works too, and loads the file a second time as another module
(two `State` classes, two registries, `isinstance` failing across them); an install
has no `ledger` at all, so the same line breaks the wheel. `pinledger.<name>` is one of
the mapped packages or the namespace's own modules: in the checkout `pinledger`'s
`__path__` reaches the whole root, where `pinledger.tests` would import too, but no
install has it. Tests import their helpers as `tests.`, the benchmark as `bench.`.

The test reads the source (ast), so imports inside functions count, and so do the
string names given to importlib (`import_module`, `find_spec`, `resources.files`).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
with (ROOT / "pyproject.toml").open("rb") as _pyproject:
    PACKAGE_DIR: dict[str, str] = tomllib.load(_pyproject)["tool"]["setuptools"]["package-dir"]
# The top-level folders that are packages of pinledger (pyproject.toml's package-dir).
ROOMS = tuple(folder for package, folder in PACKAGE_DIR.items() if package != "pinledger")
# What may follow `pinledger.`: the rooms and the namespace's own modules.
# The rooms, and the namespace's own modules (pinledger/*.py).
PINLEDGER_NAMES = {*ROOMS, *(p.stem for p in (ROOT / "pinledger").glob("*.py"))}
SCANNED = ("pinledger", *ROOMS, "tests", "bench")
# The Apache Thrift library is imported as `thrift` by the interop client, which runs
# in its own process, where the repository root is not on sys.path.
APACHE_THRIFT = {"tests/interop/py_client.py", "tests/integration/test_interop.py"}
IMPORTLIB_CALLS = {"import_module", "find_spec", "files"}


def _sources() -> list[Path]:
    return sorted(path for top in SCANNED for path in (ROOT / top).rglob("*.py"))


def _names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import and importlib call in the tree."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "pinledger":
                found.extend((node.lineno, f"pinledger.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if (
                name in IMPORTLIB_CALLS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                found.append((node.lineno, first.value))
    return found


def _problem(rel: str, name: str) -> str | None:
    """Why module `name`, imported in `rel`, is the wrong name; None if it is right."""
    parts = name.split(".")
    if parts[0] in ROOMS and not (parts[0] == "thrift" and rel in APACHE_THRIFT):
        return f"{name} (say pinledger.{name})"
    if parts[0] == "pinledger" and len(parts) > 1 and parts[1] not in PINLEDGER_NAMES:
        return f"{name} (not a package of pinledger)"
    return None


def _wrong(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    wrong = []
    for line, name in _names(ast.parse(path.read_text(encoding="utf-8"))):
        problem = _problem(rel, name)
        if problem is not None:
            wrong.append(f"{rel}:{line}: {problem}")
    return wrong


def test_the_scan_sees_the_code() -> None:
    paths = {path.relative_to(ROOT).as_posix() for path in _sources()}
    assert {"pinledger/idl.py", "ledger/state.py", "tests/unit/test_import_names.py"} <= paths
    assert any(p.startswith("bench/") for p in paths)


@pytest.mark.parametrize("top", SCANNED)
def test_code_imports_the_rooms_only_as_pinledger(top: str) -> None:
    wrong = [entry for path in sorted((ROOT / top).rglob("*.py")) for entry in _wrong(path)]
    assert wrong == []


@pytest.mark.parametrize(
    "source",
    [
        "import ledger.state",
        "from service.cli import main",
        "from projections.pg import sql",
        "import client",
        "from thrift import x",
        "from migrations import mysql",
        "from pinledger import tests",
        "def f():\n    import ledger",
        "importlib.import_module('service.server')",
        "resources.files('migrations')",
    ],
)
def test_a_bare_name_is_caught(source: str) -> None:
    names = [name for _, name in _names(ast.parse(source))]
    assert names
    assert any(_problem("ledger/probe.py", name) for name in names), names


@pytest.mark.parametrize(
    "source",
    [
        "import pinledger.ledger.state",
        "from pinledger.cli import main",
        "from pinledger import idl",
        "from tests.settings import x",
        "from bench import peers",
        "from . import sibling",
        "import thriftpy2",
        "files('pinledger.migrations')",
    ],
)
def test_a_pinledger_name_passes(source: str) -> None:
    problems = [_problem("ledger/probe.py", name) for _, name in _names(ast.parse(source))]
    assert all(problem is None for problem in problems), problems


def test_the_interop_client_may_name_apache_thrift() -> None:
    assert _problem("tests/interop/py_client.py", "thrift.transport.TSocket") is None
    assert _problem("tests/unit/test_x.py", "thrift.transport.TSocket") is not None


def test_the_editable_install_links_every_module() -> None:
    """mypy reads the rooms in the link tree of `make install` (strict editable mode);
    a module added, moved or removed since then is missing there or a dangling link,
    and mypy would not see it: say so here, where `make test-unit` runs."""
    trees = [
        Path(entry) / "pinledger"
        for entry in sys.path
        if Path(entry).parent == ROOT / "build" and Path(entry).name.startswith("__editable__.")
    ]
    if not trees:
        pytest.skip("pinledger is not installed from this checkout in strict editable mode")
    (tree,) = trees
    expected = {
        "/".join([*package.split(".")[1:], path.relative_to(ROOT / folder).as_posix()])
        for package, folder in PACKAGE_DIR.items()
        for path in (ROOT / folder).rglob("*.py")
    }
    linked = {p.relative_to(tree).as_posix() for p in tree.rglob("*.py") if p.exists()}
    dangling = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if not p.exists())
    assert (sorted(expected - linked), dangling) == ([], []), "run make install again"
