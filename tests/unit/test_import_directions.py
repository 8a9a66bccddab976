"""The folder tree is the architecture: each room imports only the rooms it may, and
no two rooms import each other (docs/decisions/0009-package-layout.md).

Data flows one way: wire -> server -> ledger -> log -> owner -> projections -> reads.
The pure ledger core knows no adapter; adapters know only their port, and each port's
fake sits beside it knowing only the port; the service never imports the client library;
only the command line (cli/) may import both the server and the client; the dashboard
(dashboard/) reads through the ports and acts through the API core; the one testing place
is imported by nobody in the runtime. The test reads the source (ast), so it checks
imports inside functions too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.source_folders import FOLDERS

ROOT = Path(__file__).resolve().parents[2]
TOP = FOLDERS

# room -> rooms it may import (besides itself). A module belongs to the longest room
# prefix that names it. Rooms not listed may import nothing of pinledger but themselves.
ALLOWED: dict[str, set[str]] = {
    "__main__": {"cli"},
    "idl": set(),
    # The OpenTelemetry SDK set up from the OTEL_* variables, for the server and the
    # client library alike.
    "otel": set(),
    # The TLS context of a connection to a server's Thrift port, for the client library
    # and a server forwarding to another alike.
    "tlsconnect": set(),
    # Several processes' Prometheus expositions as one, for the server's and the worker
    # runner's --processes alike.
    "exposition": set(),
    "ledger": set(),
    "ledger.clock": set(),
    # The in-memory log, beside its port (ledger/log.py); the contract suite holds it to
    # the Kafka adapters.
    "ledger.fake_log": {"ledger", "ledger.clock"},
    "ledger.kafka": {"ledger", "ledger.clock"},
    # The librdkafka adapter delegates group membership to the kafka-python adapter
    # (docs/decisions/0021-librdkafka-adapter.md) and shares its settings.
    "ledger.rdkafka": {"ledger", "ledger.clock", "ledger.kafka"},
    # The one place a Log adapter is chosen, by the Kafka client's name.
    "ledger.adapters": {"ledger", "ledger.kafka", "ledger.rdkafka"},
    "projections": {"ledger", "ledger.clock"},
    # The one SQL store, written once over a dialect port; it names no database.
    "projections.sql": {"ledger", "ledger.clock", "projections"},
    # Each dialect: its driver and what its database does its own way.
    "projections.pg": {"ledger", "ledger.clock", "projections", "projections.sql"},
    "projections.mysql": {"ledger", "ledger.clock", "projections", "projections.sql"},
    # The PinLater importer's reader of PinLater's MySQL databases (not a store): the
    # MySQL driver's connection helpers and the named-query reader.
    "projections.pinlater": {"projections", "projections.mysql", "projections.sql"},
    # The in-memory store, beside its port (projections/store.py); the contract suite
    # holds it to the SQL stores. It plans migrations from the Postgres dialect's list, as
    # a fresh database would run them.
    "projections.fake": {"ledger", "ledger.clock", "projections", "projections.pg"},
    # The one place a store adapter is chosen, by the DSN's scheme.
    "projections.factory": {"projections", "projections.pg", "projections.mysql"},
    # The client library shares the wire (idl) and the pure core, nothing else.
    "client": {"idl", "otel", "tlsconnect", "exposition", "ledger", "ledger.clock"},
    # Service rooms use the ports (ledger, projections), never an adapter: only the
    # server, which assembles them, names the Kafka and Postgres adapters.
    "service": {"idl", "otel", "tlsconnect", "ledger", "ledger.clock", "projections"},
    "service.observability": {
        "service",
        "ledger",
        "ledger.clock",
        "projections",
        "idl",
        "otel",
    },
    "service.ownership": {
        "service",
        "service.observability",
        "otel",
        "ledger",
        "ledger.clock",
        "projections",
    },
    "service.api": {
        "service",
        "service.ownership",
        "service.observability",
        "idl",
        "ledger",
        "ledger.clock",
        "projections",
    },
    # Store shards: the shard map, placement, moves. A leaf of the service's root.
    "service.shards": {"service", "ledger", "ledger.clock", "projections"},
    # The dashboard reads through the ports and acts through the API core; its pages are
    # served by the admin HTTP server (observability/web.py).
    "dashboard": {
        "service",
        "service.api",
        "service.observability",
        "idl",
        "ledger",
        "ledger.clock",
        "projections",
    },
    # The Thrift listening sockets: a leaf the server and the supervisor both use.
    "service.listeners": set(),
    # The parts `serve` and `dashboard` both assemble (store, log, writer, queue
    # directory, queue config, dashboard, admin HTTP port, signals), and the Kafka
    # settings of a config: it names the Kafka and Postgres adapters, as the server does.
    "service.assembly": {
        "service",
        "service.api",
        "dashboard",
        "service.observability",
        "service.shards",
        "ledger",
        "ledger.clock",
        "ledger.adapters",
        "ledger.kafka",
        "projections",
        "projections.factory",
    },
    # The server assembles every room of the service, never the client library.
    "service.server": {
        "service.assembly",
        "service",
        "service.listeners",
        "service.api",
        "dashboard",
        "service.ownership",
        "service.observability",
        "idl",
        "otel",
        "ledger",
        "ledger.clock",
        "ledger.kafka",
        "projections",
        "projections.factory",
    },
    # The supervisor of `serve --processes`: its host admin port shares the admin
    # server's handler (observability/admin_http.py), and the listener's port check.
    "service.processes": {
        "service",
        "service.observability",
        "service.listeners",
        "exposition",
    },
    # The command line and the testing place may import anything (the command line never
    # the testing place: test_nothing_in_the_runtime_imports_the_testing_place).
    "cli": {"*"},
    "service.testing": {"*"},
}
# Longest first, so a module belongs to its finest room.
ROOMS = sorted(ALLOWED, key=lambda room: -len(room.split(".")))


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] == "pinledger":
        parts.pop(0)
    return ".".join(parts)


def _sources() -> list[Path]:
    # The namespace's own modules (its __init__ only extends the import path).
    found = [p for p in sorted((ROOT / "pinledger").glob("*.py")) if p.name != "__init__.py"]
    for top in TOP:
        found.extend(sorted((ROOT / top).rglob("*.py")))
    return found


def _room(module: str) -> str | None:
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            return room
    return None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            if base == "pinledger":
                names.update(alias.name for alias in node.names)
            elif base.startswith("pinledger."):
                base = base.removeprefix("pinledger.")
                names.add(base)
                # `from pinledger.cli import trace` imports a submodule.
                names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pinledger."):
                    names.add(alias.name.removeprefix("pinledger."))
    return names


def _edges() -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> the modules with such an import."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in _sources():
        module = _module_name(path)
        source = _room(module)
        if source is None:
            continue
        for imported in _imports(path):
            target = _room(imported)
            if target is not None and target != source:
                edges[(source, target)].append(module)
    return edges


def test_every_module_belongs_to_a_room() -> None:
    homeless = [_module_name(p) for p in _sources() if _room(_module_name(p)) is None]
    assert homeless == []


def test_rooms_import_only_what_they_may() -> None:
    wrong = []
    for (source, target), modules in sorted(_edges().items()):
        allowed = ALLOWED[source]
        if "*" not in allowed and target not in allowed:
            wrong.append(f"{source} -> {target} (in {', '.join(sorted(set(modules)))})")
    assert wrong == []


def test_no_room_is_imported_by_a_room_it_imports() -> None:
    edges = set(_edges())
    cycles = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert cycles == []


@pytest.mark.parametrize("runtime", FOLDERS)
def test_nothing_in_the_runtime_imports_the_testing_place(runtime: str) -> None:
    offenders = [
        _module_name(path)
        for path in sorted((ROOT / runtime).rglob("*.py"))
        if not _module_name(path).startswith("service.testing")
        and any(name.startswith("service.testing") for name in _imports(path))
    ]
    assert offenders == []


# Third-party drivers, each confined to the rooms that are its edge: each Kafka client to
# its Kafka adapter, the Postgres driver to the Postgres dialect, the MySQL driver to the
# MySQL dialect and the PinLater reader, the Thrift library to the wire (the IDL, the
# API room, the listeners, the server and the client library).
DRIVERS: dict[str, set[str]] = {
    "kafka": {"ledger.kafka"},
    "confluent_kafka": {"ledger.rdkafka"},
    "psycopg": {"projections.pg"},
    "psycopg_pool": {"projections.pg"},
    "pymysql": {"projections.mysql", "projections.pinlater"},
    "thriftpy2": {
        "idl",
        "service.api",
        "service.listeners",
        "service.server",
        "service.testing",
        "client",
    },
}


def _third_party(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return names


def test_each_driver_is_imported_only_at_its_edge() -> None:
    wrong = []
    for path in _sources():
        module = _module_name(path)
        room = _room(module)
        for driver in _third_party(path) & set(DRIVERS):
            if room not in DRIVERS[driver]:
                wrong.append(f"{module} imports {driver}")
    assert wrong == []
