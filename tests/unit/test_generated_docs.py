"""The manual's generated pages (docs/generate.py) match the code they are written from."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_generated_page_is_stale() -> None:
    stale = _generate().stale()
    assert not stale, f"stale generated pages (run `python docs/generate.py`): {stale}"
