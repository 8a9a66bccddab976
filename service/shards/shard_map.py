"""The store's shard map (issue 23): the databases the projection may live on, in the
spirit of PinLater's MySQL backend config.

    {"shards": [{"name": "a", "dsn": "postgresql://..."},
                {"name": "b", "dsn": "mysql://...", "dequeueOnly": true}]}

name         1-64 characters of a-z, 0-9, "_" and "-": how the ledger names the shard
             (placement records), so it must not change while the shard holds data.
dsn          a postgresql:// (or postgres://) or mysql:// URL; shards may mix the two.
dequeueOnly  optional, false: a shard that takes no new partitions (to drain it).

`PINLEDGER_STORE_SHARDS` names the file; it is re-read within seconds of a change (a
broken edit is logged and the previous map stays: watched_file.py). Without one, the
single store of `PINLEDGER_STORE_DSN`/`PINLEDGER_PG_DSN` is the one shard, named
"default". Parsing is strict, as for the queue config: an unknown key is refused with
its name. No error or log line shows a DSN's password.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinledger.projections.dsn import is_mysql, redacted
from pinledger.service.watched_file import WatchedFile

log = logging.getLogger(__name__)

# The shard of a deployment without a shard map.
DEFAULT_SHARD = "default"
_NAME = re.compile(r"[a-z0-9_-]{1,64}")
_SCHEMES = ("postgresql://", "postgres://", "mysql://")


class ShardMapError(ValueError):
    pass


@dataclass(frozen=True)
class Shard:
    name: str
    dsn: str
    dequeue_only: bool = False

    @property
    def kind(self) -> str:
        return "mysql" if is_mysql(self.dsn) else "postgres"

    def __repr__(self) -> str:  # a DSN's password never in a log line or a traceback
        return f"Shard({self.name!r}, {redacted(self.dsn)!r}, dequeue_only={self.dequeue_only})"


@dataclass(frozen=True)
class ShardMap:
    shards: tuple[Shard, ...]

    def get(self, name: str) -> Shard | None:
        return next((s for s in self.shards if s.name == name), None)

    @property
    def writable(self) -> tuple[Shard, ...]:
        """The shards that take new partitions."""
        return tuple(s for s in self.shards if not s.dequeue_only)


def single(dsn: str) -> ShardMap:
    """The map of a deployment on one store."""
    return ShardMap((Shard(DEFAULT_SHARD, dsn),))


def parse_shard_map(data: bytes | str) -> ShardMap:
    try:
        doc = json.loads(data)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError both are
        raise ShardMapError(f"shard map is not valid JSON: {e}") from e
    if not isinstance(doc, dict) or set(doc) != {"shards"}:
        raise ShardMapError('the shard map must be a JSON object like {"shards": [...]}')
    entries = doc["shards"]
    if not isinstance(entries, list) or not entries:
        raise ShardMapError('"shards" must be a non-empty list of {"name": ..., "dsn": ...}')
    shards: list[Shard] = []
    for i, entry in enumerate(entries):
        shard = _shard(entry, f"shards[{i}]")
        if any(s.name == shard.name for s in shards):
            raise ShardMapError(f"shards[{i}]: shard {shard.name!r} is listed twice")
        shards.append(shard)
    if all(s.dequeue_only for s in shards):
        raise ShardMapError("every shard is dequeueOnly: new partitions would have nowhere to go")
    return ShardMap(tuple(shards))


def _shard(entry: Any, where: str) -> Shard:
    if not isinstance(entry, dict):
        raise ShardMapError(f"{where} must be an object with a name and a dsn")
    unknown = sorted(set(entry) - {"name", "dsn", "dequeueOnly"})
    if unknown:
        raise ShardMapError(
            f"{where}: unknown key {unknown[0]!r} (expected one of dequeueOnly, dsn, name)"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ShardMapError(
            f"{where}.name must be 1-64 characters of a-z, 0-9, '_' and '-', got {name!r}"
        )
    dsn = entry.get("dsn")
    if not isinstance(dsn, str) or not dsn.startswith(_SCHEMES):
        shown = redacted(dsn) if isinstance(dsn, str) else repr(dsn)
        raise ShardMapError(
            f"{where} ({name!r}): dsn must be a postgresql:// or mysql:// URL, got {shown}"
        )
    dequeue_only = entry.get("dequeueOnly", False)
    if not isinstance(dequeue_only, bool):
        raise ShardMapError(
            f"{where} ({name!r}): dequeueOnly must be true or false, got {dequeue_only!r}"
        )
    return Shard(name, dsn, dequeue_only)


def load_shard_map(path: str, fallback_dsn: str) -> ShardMap:
    """The shard map the file at `path` holds now; with no path, the one store of
    `fallback_dsn`."""
    if not path:
        return single(fallback_dsn)
    try:
        content = Path(path).read_bytes()
    except OSError as e:
        raise ShardMapError(f"cannot read shard map {path}: {e.strerror}") from None
    return parse_shard_map(content)


def home_dsn(path: str, fallback_dsn: str) -> str:
    """The DSN of the home shard (the map's first; without a map, the one store): where
    scratch schemas of a replay or a view as of a moment go."""
    return load_shard_map(path, fallback_dsn).shards[0].dsn


class ShardMapWatcher(WatchedFile[ShardMap]):
    """The shard map file, re-read when it changes; without a file, `fallback`."""

    def __init__(
        self,
        path: Path | None,
        fallback: ShardMap,
        on_change: Callable[[ShardMap], None] = lambda _: None,
        interval_s: float = 1.0,
    ) -> None:
        super().__init__(
            path, parse_shard_map, fallback, on_change, "shard map", ShardMapError, log, interval_s
        )
