"""The names a store accepts for its schema (a Postgres schema, a MariaDB database):
checked before they are quoted into DDL."""

from __future__ import annotations

import re

from pinledger.projections.store import StoreError

_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_schema_name(schema: str, what: str = "schema") -> str:
    if not _SCHEMA_RE.fullmatch(schema):
        raise StoreError(
            f"{what} name {schema!r} must be lower-case letters, digits and '_' "
            "(at most 63, not starting with a digit)"
        )
    return schema
