"""The canonical MySQL schema (schema.sql: what all of migrations/mysql/ together
produces) and a description of a live database's shape, to check that the two agree
(as projections/pg/schema.py does for Postgres)."""

from __future__ import annotations

from typing import Any, NamedTuple

from pinledger.projections.mysql.sql import PACKAGE, query
from pinledger.projections.mysql.store import Store
from pinledger.projections.sql.named_queries import split_statements

SCHEMA_FILE = PACKAGE.joinpath("schema.sql")


class SchemaShape(NamedTuple):
    """Tables' columns (table, column, type, nullable, default, collation), indexes'
    columns (table, index, unique, position, column), CHECK constraints (table, name,
    clause) and partitioning (table, method, expression), sorted."""

    columns: list[tuple[Any, ...]]
    indexes: list[tuple[Any, ...]]
    constraints: list[tuple[Any, ...]]
    partitioning: list[tuple[Any, ...]]


def create_canonical(store: Store) -> None:
    """Create the canonical schema's tables in the store's (empty) database."""
    with store.dialect.cursor("creating the canonical schema") as cur:
        for statement in split_statements(SCHEMA_FILE.read_text(encoding="utf-8")):
            cur.execute(statement)


def describe(store: Store) -> SchemaShape:
    """The shape of the store's database (its own name is not in it)."""
    shape = []
    with store.dialect.cursor("describing the schema") as cur:
        for name in ("describe_columns", "describe_indexes", "describe_constraints"):
            cur.execute(query(name))
            shape.append([tuple(row) for row in cur.fetchall()])
        cur.execute(query("describe_partitioning"))
        shape.append([tuple(row) for row in cur.fetchall()])
    return SchemaShape(*shape)
