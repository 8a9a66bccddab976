"""The package list, found in the mapped folders rather than written down: a list in
pyproject.toml had to name every new subpackage, and one left out was missing from
the wheel and from the editable link tree that mypy reads. The folders are the ones
pyproject.toml's package-dir maps under `pinledger`, read from it: that mapping is the
one place that names them (docs/decisions/0009-package-layout.md)."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup


def packages() -> list[str]:
    with (Path(__file__).parent / "pyproject.toml").open("rb") as f:
        package_dir: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    found = []
    for package, folder in package_dir.items():
        # Named, then its subpackages found: thrift/ is a namespace package (the IDL
        # only), which find_packages would not report.
        found.append(package)
        if package != "pinledger":  # pinledger/ holds only the namespace's own modules
            found.extend(f"{package}.{sub}" for sub in find_packages(where=folder))
    return found


setup(packages=packages())
