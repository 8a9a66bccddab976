"""The canonical schema (schema.sql: what all migrations together produce) and a
description of a live schema's shape, to check that the two agree."""

from __future__ import annotations

from importlib.resources import files
from typing import Any, NamedTuple

from pinledger.projections.pg.sql import query
from pinledger.projections.pg.store import Store

SCHEMA_FILE = files("pinledger.projections.pg").joinpath("schema.sql")


class SchemaShape(NamedTuple):
    """Tables' columns (table, column, type, nullable, default), indexes (table, name,
    definition) and constraints (table, name, kind, definition), sorted."""

    columns: list[tuple[Any, ...]]
    indexes: list[tuple[Any, ...]]
    constraints: list[tuple[Any, ...]]


def create_canonical(store: Store) -> None:
    """Create the canonical schema's tables in the store's (empty) schema."""
    with store.dialect.connection("creating the canonical schema", transaction=True) as conn:
        conn.execute(SCHEMA_FILE.read_text(encoding="utf-8").encode("utf-8"))


def describe(store: Store) -> SchemaShape:
    """The shape of the store's schema, with the schema's own name taken out of the
    definitions so two schemas compare."""
    with store.dialect.connection("describing the schema") as conn:
        columns = [tuple(row) for row in conn.execute(query("describe_columns"))]
        indexes = [
            (
                table,
                name,
                # ON ONLY: the index of a partitioned table (job_events).
                definition.replace(f" ON {store.schema}.", " ON ").replace(
                    f" ON ONLY {store.schema}.", " ON ONLY "
                ),
            )
            for table, name, definition in conn.execute(query("describe_indexes"))
        ]
        constraints = [tuple(row) for row in conn.execute(query("describe_constraints"))]
    return SchemaShape(columns, indexes, constraints)
