"""What a Postgres error becomes (projections/pg/connection.py `store_error`): a session
Postgres ended because this server stalled inside a transaction is a connection to open
again, not a refusal of the record (which would pause the partition as a poison record:
a 5 s SIGSTOP cost its partition 5 s more that way, chaos test of issue 43)."""

from __future__ import annotations

import psycopg

from pinledger.projections.pg.connection import store_error
from pinledger.projections.store import StoreError, StoreUnavailableError


def test_a_session_ended_idle_in_a_transaction_is_unavailable_not_refused() -> None:
    ended = store_error(
        psycopg.errors.IdleInTransactionSessionTimeout("terminating connection"),
        "committing a batch",
        "s",
    )
    assert isinstance(ended, StoreUnavailableError)
    assert "this server stalled" in str(ended)


def test_a_row_the_schema_refuses_is_still_a_refusal() -> None:
    refused = store_error(
        psycopg.errors.UniqueViolation("duplicate key"), "committing a batch", "s"
    )
    assert type(refused) is StoreError
