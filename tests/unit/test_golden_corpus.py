"""The golden corpus (tests/golden/): records as pinledger releases wrote them, which
every later release must read and fold the same way, since the log keeps its records
forever (replay, getJobHistory's fallback to the log, the verify). A corpus file is
never changed; a new record form adds one (tests/golden/write_corpus.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pinledger.ledger import codec, formats
from pinledger.ledger.descriptor import local_id_for
from pinledger.ledger.events import CatalogEvent, Enqueued
from pinledger.ledger.log import LogRecord
from pinledger.projections.catalog_log import catalog_queues
from pinledger.projections.fake.store import FakeStore
from pinledger.projections.projector import PartitionProjector
from pinledger.projections.schedule_ticks import ticks_of
from pinledger.projections.skips import skips_of
from tests.golden.write_corpus import (
    CATALOG_FIELDS,
    folded,
    paused_json,
    skipped_json,
    ticks_json,
)

CORPUS = Path(__file__).parent.parent / "golden"
FILES = sorted(CORPUS.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _records(document: dict[str, Any]) -> list[LogRecord]:
    return [
        LogRecord(
            "q",
            0,
            r["offset"],
            r["value"].encode("utf-8"),
            [(k, v.encode("ascii")) for k, v in r["headers"]],
        )
        for r in document["records"]
    ]


def test_no_corpus_file_ever_changes() -> None:
    listed = {}
    for line in (CORPUS / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    assert {p.name for p in FILES} == set(listed), (
        "every corpus file is listed in tests/golden/SHA256SUMS, and only they: add a "
        "file with tests/golden/write_corpus.py, never remove one"
    )
    for path in FILES:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[path.name], (
            f"{path.name} changed: a corpus file holds records a release wrote, which the "
            "log keeps forever; add a new file for a new form instead"
        )


def test_the_corpus_holds_every_event_type() -> None:
    seen: set[str] = set()
    for path in FILES:
        for record in _records(_load(path)):
            seen.update(codec.tag_of(e) for e in codec.record_events(record.value, record.headers))
    assert seen == set(codec.EVENT_TAGS.values())


def _own_rows(timeline: Iterable[list[Any]]) -> list[list[Any]]:
    """The rows of each event under the job it names: without the holder's copy of a
    keyed enqueue its key turned away (timeline_rows.turned_away_row), which came after
    the files that hold such enqueues and is checked in tests/unit/test_unique_trace.py."""
    return [
        row
        for row in timeline
        if not (row[3] == codec.EVENT_TAGS[Enqueued] and row[2] != local_id_for(row[0], row[1]))
    ]


@pytest.mark.parametrize(
    "path", [p for p in FILES if _load(p)["topic"] == "queue"], ids=lambda p: p.name
)
def test_queue_records_fold_as_the_release_that_wrote_them_folded_them(path: Path) -> None:
    document = _load(path)
    expected = document["expected"]
    got = folded(_records(document))
    assert _own_rows(got["timeline"]) == expected["timeline"]
    assert sorted(got["jobs"]) == sorted(expected["jobs"])
    for local_id, want in expected["jobs"].items():
        # The fields the file holds: a field a later Job adds is not in old files.
        assert {name: got["jobs"][local_id][name] for name in want} == want, local_id
    assert got["traceparents"] == expected["traceparents"]


@pytest.mark.parametrize(
    "path", [p for p in FILES if _load(p)["topic"] == "queue"], ids=lambda p: p.name
)
def test_queue_records_project_as_the_release_that_wrote_them_folded_them(path: Path) -> None:
    """The live projection's path (PartitionProjector, into the in-memory store), one
    record per batch as an owner that keeps up projects them."""
    document = _load(path)
    expected = document["expected"]
    store = FakeStore()
    store.migrate()
    store.start_offset("q", 0)  # as the queue's creation in the catalog would
    projector = PartitionProjector(store, "q", "q", 0)
    for record in _records(document):
        projector.apply([record])
    ids = sorted({local_id for _, _, local_id, _, _ in expected["timeline"]})
    timeline = sorted(
        _own_rows(
            [e.offset, e.idx, e.local_id, e.type, e.verdict]
            for local_id in ids
            for e in store.job_events("q", 0, local_id)
        )
    )
    assert timeline == sorted(expected["timeline"])
    jobs = store.load_jobs("q", 0, ids)
    assert sorted(str(i) for i in jobs) == sorted(expected["jobs"])
    for local_id, job in jobs.items():
        want = expected["jobs"][str(local_id)]
        assert job.state.name == want["state"]
        assert len(job.body) == want["body_bytes"]
        assert (job.attempts_remaining, job.custom_status, job.run_after) == (
            want["attempts_remaining"],
            want["custom_status"],
            want["run_after"],
        )
    assert store.offset("q", 0) == len(document["records"])


@pytest.mark.parametrize(
    "path", [p for p in FILES if _load(p)["topic"] == "catalog"], ids=lambda p: p.name
)
def test_catalog_records_decode_as_written(path: Path) -> None:
    document = _load(path)
    found: list[list[Any]] = []
    events = [e for record in _records(document) for e in codec.decode(record.value).events]
    for event in events:
        assert isinstance(event, CatalogEvent)
        fields = [getattr(event, name) for name in CATALOG_FIELDS if hasattr(event, name)]
        found.append([codec.tag_of(event), *fields])
    assert found == document["expected"]["catalog"]
    # Files written before ledger formats existed hold none: format 1.
    want = document["expected"].get("ledger_format", formats.PLAIN)
    assert formats.folded(formats.PLAIN, events) == want
    # Files written before skipped records existed hold none.
    envelopes = [codec.decode(record.value) for record in _records(document)]
    assert skipped_json(skips_of(envelopes)) == document["expected"].get("skipped", {})
    # Files written before pauses existed hold none (and no queue of theirs is paused).
    if "paused" in document["expected"]:
        assert paused_json(envelopes) == document["expected"]["paused"]
    else:
        assert not any(row.paused for row in catalog_queues(envelopes).values())
    # Files written before periodic jobs existed hold no tick.
    if "ticks" in document["expected"]:
        assert ticks_json(envelopes) == document["expected"]["ticks"]
    else:
        assert ticks_of(envelopes) == []
