"""The manual's generated pages, written from the code that holds their truth.

    python docs/generate.py            # write every generated page
    python docs/generate.py --check    # exit 1 naming each page that is stale

Each entry of PAGES maps a page under docs/ to a function returning its Markdown; the
function lives beside the truth it reads (the metrics catalogue, `Config`, the CLI's
parsers), so a page cannot say what the code does not. tests/unit/test_generated_docs.py
runs the check, so a stale page fails `make test`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pinledger.service.config_reference import settings_page
from pinledger.service.observability import catalogue

DOCS = Path(__file__).resolve().parent

PAGES: dict[str, Callable[[], str]] = {
    "reference/metrics.md": catalogue.reference_page,
    "reference/settings.md": settings_page,
}


def stale() -> list[str]:
    """The generated pages whose file differs from what their code would write now."""
    out = []
    for rel, render in sorted(PAGES.items()):
        path = DOCS / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != render():
            out.append(rel)
    return out


def write() -> list[str]:
    """Write every generated page; the pages written."""
    for rel, render in sorted(PAGES.items()):
        path = DOCS / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(), encoding="utf-8")
    return sorted(PAGES)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        pages = stale()
        for rel in pages:
            print(f"docs/{rel} is stale: run `python docs/generate.py` and commit it")
        return 1 if pages else 0
    if argv[1:]:
        print("usage: python docs/generate.py [--check]", file=sys.stderr)
        return 2
    for rel in write():
        print(f"wrote docs/{rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
