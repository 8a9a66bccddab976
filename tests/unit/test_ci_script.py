"""CI runs what the README tells a new user to run, and nothing more: `.ci/run` may
install the package (`make install`, which `make test` runs too), lint and type-check,
and then runs `make test`, which must set up everything the tests need by itself (the
system packages of stack/install.sh, the stack). A set-up step that only CI ran made
`make test` fail on a fresh machine while CI was green (issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What .ci/run may run: the README's make targets, and the stack's status and stop.
ALLOWED = {
    ("make", "install"),
    ("make", "lint", "types"),
    ("make", "test"),
    ("bash", "stack/stack.sh", "status"),
    ("bash", "stack/stack.sh", "down"),
}
_COMMAND = re.compile(
    r"(?:^|[\s;&|(\'])(make|bash|apt-get|apt|pip|pip3|python3?)((?:\s+[\w./=-]+)+)"
)


def _commands(script: str) -> list[tuple[str, ...]]:
    """Each make, bash, apt or pip command of the script's lines (comments left out),
    as words."""
    found = []
    for raw in script.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        for name, rest in _COMMAND.findall(raw):
            found.append((name, *rest.split()))
    return found


def test_ci_runs_only_the_readmes_make_targets_and_no_set_up_of_its_own() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    ran = _commands(script)
    assert ran, "no command found in .ci/run"
    extra = [" ".join(c) for c in ran if c[:3] not in ALLOWED and c[:2] not in ALLOWED]
    assert extra == [], f".ci/run runs set-up that `make test` does not: {extra}"
    assert ("make", "test") in ran
    assert "install.sh" not in script and "apt-get" not in script


def test_make_test_installs_the_system_packages_and_starts_the_stack() -> None:
    makefile = (ROOT / "Makefile").read_text()
    test = re.search(r"^test:([^#\n]*)", makefile, re.MULTILINE)
    assert test is not None, "no test target in the Makefile"
    assert set(test.group(1).split()) >= {"install", "system-packages", "stack-up"}
    packages = re.search(r"^system-packages:.*\n\t(.*)$", makefile, re.MULTILINE)
    # The whole list of stack/install.sh, not some of it.
    assert packages is not None and packages.group(1).strip() == "bash stack/install.sh"
