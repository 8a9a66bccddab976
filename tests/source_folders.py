"""The repository's Python rooms at the top level, read from pyproject.toml's
package-dir, the one place that names them: the tests that read every source file
(import directions, store types, metric names) look where the wheel does, so a new
top-level room is searched as soon as it is mapped."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mapped() -> dict[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        package_dir: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return package_dir


# Each mapped folder holding Python code (thrift/ holds the IDL, migrations/ SQL and an
# empty package), without pinledger/ itself, which holds the namespace's own modules.
FOLDERS: tuple[str, ...] = tuple(
    folder
    for package, folder in _mapped().items()
    if package != "pinledger"
    and any(p.name != "__init__.py" for p in (ROOT / folder).rglob("*.py"))
)
