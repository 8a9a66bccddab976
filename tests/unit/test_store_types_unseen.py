"""Nobody outside projections/ asks a store what it is: a caller asks it what it can do
(projections/store.py `StoreShards`: its shards, where a partition is placed, whether
partitions move), so a store of several shards and a store that is one database are
used alike (issue 41; River asks its driver `SupportsListener()` the same way). The test
reads the source (ast) of every room but projections/ and tests/, the benchmarks
included, and fails on an `isinstance` or `issubclass` naming a concrete store."""

from __future__ import annotations

import ast
from pathlib import Path

from pinledger.projections.fake.store import FakeStore
from pinledger.projections.mysql.store import Store as MyStore
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections.sharded_store import ShardedStore
from pinledger.projections.sql.store import SqlStore
from tests.source_folders import FOLDERS

ROOT = Path(__file__).resolve().parents[2]
# Where a store may know its own kind: the stores themselves, and the tests of them.
EXEMPT = ("projections", "tests")
SEARCHED = ("pinledger", *(f for f in FOLDERS if f not in EXEMPT), "bench")

# The concrete stores, by the module and name they are imported from.
CONCRETE = {
    f"{cls.__module__}.{cls.__qualname__}"
    for cls in (ShardedStore, SqlStore, PgStore, MyStore, FakeStore)
}


def _qualified(node: ast.expr, names: dict[str, str]) -> str | None:
    """What an expression names, through the module's imports (None: not an import)."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, names)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _named_types(node: ast.expr) -> list[ast.expr]:
    """The types an isinstance's second argument names: one, a tuple, or a union."""
    if isinstance(node, ast.Tuple):
        return [t for element in node.elts for t in _named_types(element)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _named_types(node.left) + _named_types(node.right)
    return [node]


def type_checks(source: str) -> list[tuple[int, str]]:
    """(line, store) of every isinstance/issubclass on a concrete store in `source`."""
    tree = ast.parse(source)
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            for named in _named_types(node.args[1]):
                what = _qualified(named, names)
                if what in CONCRETE:
                    found.append((node.lineno, what))
    return sorted(found)


def test_no_room_but_projections_checks_a_store_for_its_type() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: isinstance on {store}"
        for top in SEARCHED
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.relative_to(ROOT).parts[0] not in EXEMPT
        for line, store in type_checks(path.read_text())
    ]
    assert offenders == [], (
        "ask the store (projections/store.py StoreShards) instead:\n" + "\n".join(offenders)
    )


def test_the_check_sees_aliases_tuples_unions_and_module_paths() -> None:
    source = """
from pinledger.projections.sharded_store import ShardedStore as Sharded
from pinledger.projections.pg.store import Store as PgStore
from pinledger.projections import sharded_store
import pinledger.projections.fake.store
from pinledger.projections.store import LedgerStore

isinstance(a, Sharded)
isinstance(b, (int, PgStore))
isinstance(c, str | sharded_store.ShardedStore)
issubclass(d, pinledger.projections.fake.store.FakeStore)
isinstance(e, LedgerStore)
"""
    assert type_checks(source) == [
        (8, "pinledger.projections.sharded_store.ShardedStore"),
        (9, "pinledger.projections.pg.store.Store"),
        (10, "pinledger.projections.sharded_store.ShardedStore"),
        (11, "pinledger.projections.fake.store.FakeStore"),
    ]
