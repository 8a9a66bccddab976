"""The package list, found in the mapped folders rather than written down: a list in
pyproject.toml had to name every new subpackage, and one left out was missing from
the wheel and from the editable link tree that mypy reads. Everything else is in
pyproject.toml, whose package-dir maps each top-level folder under `pinledger`
(docs/decisions/0009-package-layout.md)."""

from setuptools import find_packages, setup

# The top-level folders that pyproject.toml's package-dir maps to pinledger.<folder>.
ROOMS = ("ledger", "projections", "service", "client", "thrift", "migrations")


def packages() -> list[str]:
    found = ["pinledger"]
    for room in ROOMS:
        # thrift/ is a namespace package (the IDL only), so it is named, not found.
        found.append(f"pinledger.{room}")
        found.extend(f"pinledger.{room}.{sub}" for sub in find_packages(where=room))
    return found


setup(packages=packages())
