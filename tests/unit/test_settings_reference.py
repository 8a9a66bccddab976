"""The settings reference (docs/reference/settings.md) is written from `Config`: every
setting with its file key, environment variable, type, default and description."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pinledger.service.config import Config
from pinledger.service.config_reference import settings_page

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in settings_page().splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_setting_has_a_row_with_its_variable_type_default_and_description() -> None:
    rows = _rows()
    assert list(rows) == [f.name for f in dataclasses.fields(Config)]
    assert rows["port"] == [
        "`port`",
        "`PINLEDGER_PORT`",
        "integer",
        "`9010`",
        "The Thrift port (framed transport, binary protocol).",
    ]
    assert rows["claim_timeout_s"][2:4] == ["float", "`600`"]
    assert rows["kafka_ssl_check_hostname"][2:4] == ["boolean", "`true`"]
    assert rows["store_dsn"][3] == "empty"
    # What the loader sets when nothing does, not the field's empty default.
    assert rows["server_id"][3] == "`<hostname>:<pid>`"
    assert rows["metrics_token"][1] == "`PINLEDGER_METRICS_TOKEN` or `PINLEDGER_METRICS_TOKEN_FILE`"
    assert rows["metrics_token"][4].endswith("A secret: never logged or shown.")
    assert all(cells[4] for cells in rows.values())


def test_the_pages_links_into_the_manual_lead_to_pages_that_exist() -> None:
    links = re.findall(r"\]\(\.\./([^)]+)\)", settings_page())
    assert links, "the decisions the settings name are links"
    for link in links:
        assert (ROOT / "docs" / link).is_file(), link
