"""The manual (mkdocs.yml, docs/) builds with --strict, and the README's links into it
resolve: a broken link or anchor, a page left out of the navigation, or a README link
to a page or section that moved fails the tests, not a reader."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinledger.service.observability.catalogue import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
# A Markdown link's target: [text](target), images included; not an autolink or URL.
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manual, built once with --strict into a temporary directory."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs and mkdocs-material are dev dependencies: run `make install`")
    out = tmp_path_factory.mktemp("site")
    # Material for MkDocs prints a banner about its successor on every run; not a warning.
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Its warnings, with the lines that go on from them (the pages outside the nav).
    problems = [line for line in built.stderr.splitlines() if not line.startswith("INFO")]
    assert built.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems)
    return out


def test_the_manual_builds_strictly_with_every_page_in_the_nav(site: Path) -> None:
    assert (site / "index.html").is_file()
    # Every page under docs/ was built (a page outside the nav fails --strict above).
    pages = sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs").rglob("*.md"))
    missing = [str(p) for p in pages if not _built(site, p).is_file()]
    assert missing == [], f"pages not in the built site: {missing}"
    # docs/generate.py is not a page and not published.
    assert not (site / "generate.py").exists()


def _built(site: Path, page: Path) -> Path:
    """Where MkDocs writes a page (use_directory_urls: guides/x.md -> guides/x/index.html)."""
    if page.name == "index.md":
        return site / page.parent / "index.html"
    return site / page.with_suffix("") / "index.html"


def test_every_relative_link_of_the_readme_resolves(site: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    broken = []
    for target in _LINK.findall(readme):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else ROOT / "README.md"
        if not file.exists():
            broken.append(f"{target}: no {path}")
            continue
        if anchor and file.suffix == ".md" and file.is_relative_to(ROOT / "docs"):
            page = _built(site, file.relative_to(ROOT / "docs")).read_text(encoding="utf-8")
            if f'id="{anchor}"' not in page:
                broken.append(f"{target}: no section #{anchor} on that page")
    assert broken == [], f"README links that lead nowhere: {broken}"


def test_the_readme_is_a_front_door_not_the_manual() -> None:
    """At most ~250 lines: what pinledger is, the two commands, a tour, links."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    commands = re.search(r"```sh\n(.*?)```", readme, re.DOTALL)
    assert commands is not None, "the README opens with its two commands"
    assert [line.split("#")[0].strip() for line in commands.group(1).splitlines()] == [
        "make run",
        "make test",
    ]
    assert "docs/index.md" in readme, "the README links to the manual"


# A metric as a page names it in code: `pinledger_x` or `pinledger_x{label,label="v"}`.
_METRIC = re.compile(r"`(pinledger_[a-z_]+)(?:\{([^`]*)\})?`")


def _written_pages() -> list[Path]:
    """The pages written by hand that say what the system does today: not the generated
    reference, not the decision records and the measurements' history (records of their
    time, which may name what has changed since)."""
    docs = ROOT / "docs"
    return [
        p
        for p in sorted(docs.rglob("*.md"))
        if p.relative_to(docs).parts[0] not in ("reference", "decisions")
        and p.name != "performance-history.md"
    ] + [ROOT / "README.md"]


def test_the_pages_name_only_catalogued_metrics_with_their_labels() -> None:
    """A metric renamed or relabelled in the catalogue cannot live on in the manual's
    prose (the metrics reference itself is generated from the catalogue)."""
    wrong = []
    for page in _written_pages():
        for name, labels in _METRIC.findall(page.read_text(encoding="utf-8")):
            spec = BY_NAME.get(name)
            if spec is None:
                wrong.append(f"{page.relative_to(ROOT)}: {name} is not in the catalogue")
                continue
            named = {m.group(1) for m in re.finditer(r"(?:^|,)\s*([a-z_]+)", labels)}
            if not named <= set(spec.labels):
                wrong.append(
                    f"{page.relative_to(ROOT)}: {name} has no label {named - set(spec.labels)}"
                )
    assert wrong == [], "\n".join(wrong)
