"""Truths defined once: the job states are the IDL's, and the client shares the
ledger's states and status cap."""

from __future__ import annotations

from pinledger import client
from pinledger.client.job_context import MAX_STATUS
from pinledger.idl import pinlater
from pinledger.ledger.state import MAX_CUSTOM_STATUS, JobState


def test_job_states_are_the_idls() -> None:
    idl = pinlater.PinLaterJobState
    assert {s.name: s.value for s in JobState} == dict(idl._NAMES_TO_VALUES)


def test_the_client_uses_the_ledgers_states_and_cap() -> None:
    assert client.JobState is JobState
    assert MAX_STATUS == MAX_CUSTOM_STATUS
