"""pinledger: a drop-in PinLater job service built as an event-sourced job ledger.

The rooms live in the repository's top-level folders (ledger/, projections/,
service/, client/, thrift/, migrations/); setuptools maps them under this one import
name (pyproject.toml's package-dir), so an installed pinledger (wheel or editable)
holds `pinledger/ledger/...` like any package (docs/decisions/0009-package-layout.md).

In the checkout itself, this folder holds only the namespace's own modules, and the
rooms are its siblings: when the interpreter finds this `pinledger` (the working
directory of `python -m pytest` or `python -m pinledger` at the root comes before any
install on sys.path), the repository root joins `__path__`, so `pinledger.ledger` is
`ledger/`, the same files an install maps. An install (a wheel, or the editable link
tree of `make install`) has the rooms inside and is left alone.
"""

from pathlib import Path

_HERE = Path(__file__).parent
_ROOT = _HERE.parent
if not (_HERE / "ledger").is_dir() and (_ROOT / "ledger" / "__init__.py").is_file():
    __path__.append(str(_ROOT))
