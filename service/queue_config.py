"""The queue-config file: PinLater's JSON layout, with pinledger's additions.

    {"queues": [{"name": "q", "queueConfig": {"maxJobsPerSecond": 2.5,
                                             "partitions": 4,
                                             "drainPartitions": [0, 2]}}]}

maxJobsPerSecond  number >= 0, cluster-wide dequeue rate; 0 pauses the queue; absent means
                  unlimited.
partitions        integer >= 1, the partitions this queue takes jobs on: createQueue
                  uses it, and a change resizes the queue live (decision 0030); absent
                  means the server's default, never resized. Or an object letting the
                  servers adapt the count between bounds
                  (service/ownership/maintenance/adaptation.py): {"min": 1, "max": 32}
                  and optionally "growRate" (enqueues/s per
                  partition, 200), "growBacklog" (due jobs per partition, 1000),
                  "shrinkEmptyRatio" (share of empty dequeue answers, 0.5),
                  "minDequeues" (50), "cooldownSeconds" (300), "windowSeconds" (60).
drainPartitions   integers >= 0, partitions that take no new enqueues and are emptied by
                  dequeues (PinLater's dequeue-only shards).
uniqueForSeconds  number >= 0, how long a unique job's key stays taken after its job
                  finished (decision 0037); absent or 0: only while it is unfinished.
                  Written into each keyed enqueue's record, so a change holds for the
                  enqueues after it and a replay decides as the live fold did.
schedules         a list of periodic jobs (decision 0038; service/schedules/spec.py):
                  each {"name", "cron" (+ "timezone") or "everySeconds", "body",
                  "priority", "attempts"}; a change holds from the next tick on.

Parsing is strict: an unknown key is more likely a typo of a limit the operator meant to
set than something to ignore, so it is refused with the key named. The watcher reloads
the file when it changes; a broken edit is logged and the last good config stays in force.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pinledger.service.partition_policy import Bounds, Thresholds
from pinledger.service.schedules.spec import ScheduleError, ScheduleSpec, parse_schedules
from pinledger.service.watched_file import WatchedFile

log = logging.getLogger(__name__)


class QueueConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Adaptive:
    """`"partitions": {"min": .., "max": ..}`: the servers choose the count."""

    bounds: Bounds
    thresholds: Thresholds = field(default_factory=Thresholds)
    # How long each measurement runs before the policy decides on it.
    window_s: float = 60.0


@dataclass(frozen=True)
class QueueSettings:
    max_jobs_per_second: float | None = None
    # A fixed count; None with `adaptive` set, or for the server's default.
    partitions: int | None = None
    drained_partitions: frozenset[int] = frozenset()
    adaptive: Adaptive | None = None
    # uniqueForSeconds, in ms.
    unique_for_ms: int = 0
    # Periodic jobs (decision 0038).
    schedules: tuple[ScheduleSpec, ...] = ()

    def initial_partitions(self, default: int) -> int:
        """The partitions createQueue gives the queue."""
        if self.partitions is not None:
            return self.partitions
        if self.adaptive is not None:
            return max(self.adaptive.bounds.min, min(default, self.adaptive.bounds.max))
        return default


_DEFAULT = QueueSettings()
# The longest uniqueForSeconds: a key's window must stay a bigint of milliseconds.
_CENTURY_S = 100 * 365 * 86_400


@dataclass(frozen=True)
class QueueConfig:
    queues: Mapping[str, QueueSettings] = field(default_factory=lambda: MappingProxyType({}))

    def settings(self, queue: str) -> QueueSettings:
        return self.queues.get(queue, _DEFAULT)

    def rates(self) -> dict[str, float]:
        """maxJobsPerSecond by queue, for the queues that have one."""
        return {
            name: s.max_jobs_per_second
            for name, s in self.queues.items()
            if s.max_jobs_per_second is not None
        }


def parse_queue_config(data: bytes | str) -> QueueConfig:
    try:
        doc = json.loads(data, object_pairs_hook=_no_duplicate_keys)
    except QueueConfigError:
        raise
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError both are
        raise QueueConfigError(f"queue config is not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise QueueConfigError('queue config must be a JSON object like {"queues": [...]}')
    _refuse_unknown(doc, {"queues"}, "queue config")
    entries = doc.get("queues", [])
    if not isinstance(entries, list):
        raise QueueConfigError('"queues" must be a list of {"name": ..., "queueConfig": {...}}')
    queues: dict[str, QueueSettings] = {}
    for i, entry in enumerate(entries):
        where = f"queues[{i}]"
        if not isinstance(entry, dict):
            raise QueueConfigError(f"{where} must be an object with a name and a queueConfig")
        _refuse_unknown(entry, {"name", "queueConfig"}, where)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise QueueConfigError(f"{where}.name must be a non-empty string, got {name!r}")
        where = f"{where} ({name!r})"
        if name in queues:
            raise QueueConfigError(f"{where}: queue {name!r} is listed twice")
        queues[name] = _settings(entry.get("queueConfig", {}), where)
    return QueueConfig(MappingProxyType(queues))


def _settings(cfg: Any, where: str) -> QueueSettings:
    if not isinstance(cfg, dict):
        raise QueueConfigError(f"{where}.queueConfig must be an object, got {cfg!r}")
    _refuse_unknown(
        cfg,
        {"maxJobsPerSecond", "partitions", "drainPartitions", "uniqueForSeconds", "schedules"},
        where,
    )
    rate = cfg.get("maxJobsPerSecond")
    if rate is not None and not (_is_number(rate) and math.isfinite(rate) and rate >= 0):
        raise QueueConfigError(
            f"{where}: maxJobsPerSecond must be a number >= 0 (0 pauses the queue), got {rate!r}"
        )
    partitions = cfg.get("partitions")
    adaptive = None
    if isinstance(partitions, dict):
        adaptive = _adaptive(partitions, where)
        partitions = None
    elif partitions is not None and not (_is_int(partitions) and partitions >= 1):
        raise QueueConfigError(
            f"{where}: partitions must be an integer >= 1 or an object like "
            f'{{"min": 1, "max": 32}}, got {partitions!r}'
        )
    drained = cfg.get("drainPartitions", [])
    if not (isinstance(drained, list) and all(_is_int(p) and p >= 0 for p in drained)):
        raise QueueConfigError(
            f"{where}: drainPartitions must be a list of partition numbers >= 0, got {drained!r}"
        )
    unique_for = cfg.get("uniqueForSeconds", 0)
    if not (_is_number(unique_for) and 0 <= unique_for <= _CENTURY_S):
        raise QueueConfigError(
            f"{where}: uniqueForSeconds must be a number of seconds from 0 to {_CENTURY_S} "
            f"(a century), got {unique_for!r}"
        )
    try:
        schedules = parse_schedules(cfg.get("schedules", []), where)
    except ScheduleError as exc:
        raise QueueConfigError(str(exc)) from None
    return QueueSettings(
        max_jobs_per_second=None if rate is None else float(rate),
        partitions=partitions,
        drained_partitions=frozenset(drained),
        adaptive=adaptive,
        unique_for_ms=round(unique_for * 1000),
        schedules=schedules,
    )


# Optional keys of an adaptive `partitions` object: (Thresholds field, at least, integer).
_ADAPTIVE_KEYS = {
    "growRate": ("grow_rate", 0.0, False),
    "growBacklog": ("grow_backlog", 1, True),
    "shrinkEmptyRatio": ("shrink_empty_ratio", 0.0, False),
    "minDequeues": ("min_dequeues", 1, True),
    "cooldownSeconds": ("cooldown_s", 0.0, False),
}


def _adaptive(cfg: dict[str, Any], where: str) -> Adaptive:
    where = f"{where}: partitions"
    _refuse_unknown(cfg, {"min", "max", "windowSeconds", *_ADAPTIVE_KEYS}, where)
    low: Any = cfg.get("min")
    high: Any = cfg.get("max")
    if not (_is_int(low) and _is_int(high) and 1 <= low <= high):
        raise QueueConfigError(
            f"{where} needs integers 1 <= min <= max, got min {low!r}, max {high!r}"
        )
    thresholds: dict[str, Any] = {}
    for key, (name, least, integer) in _ADAPTIVE_KEYS.items():
        value = cfg.get(key)
        if value is None:
            continue
        ok = _is_int(value) if integer else _is_number(value) and math.isfinite(value)
        if not ok or value < least or (name == "grow_rate" and value <= 0):
            kind = "an integer" if integer else "a number"
            bound = "> 0" if name == "grow_rate" else f">= {least}"
            raise QueueConfigError(f"{where}.{key} must be {kind} {bound}, got {value!r}")
        if name == "shrink_empty_ratio" and value > 1:
            raise QueueConfigError(f"{where}.{key} must be between 0 and 1, got {value!r}")
        thresholds[name] = value
    window = cfg.get("windowSeconds", 60.0)
    if not (_is_number(window) and math.isfinite(window) and window >= 1):
        raise QueueConfigError(f"{where}.windowSeconds must be a number >= 1, got {window!r}")
    return Adaptive(Bounds(low, high), Thresholds(**thresholds), float(window))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # JSON true is not 1


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _refuse_unknown(obj: dict[str, Any], known: set[str], where: str) -> None:
    for key in obj:
        if key not in known:
            raise QueueConfigError(
                f"{where}: unknown key {key!r} (expected one of {', '.join(sorted(known))})"
            )


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys silently; an operator who wrote a limit
    # twice should learn which one is not in force.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise QueueConfigError(f"key {key!r} appears twice in the same object")
        obj[key] = value
    return obj


class QueueConfigWatcher(WatchedFile[QueueConfig]):
    """Loads the queue-config file and reloads it when it changes (watched_file.py).

    A broken or missing file at start raises QueueConfigError: better to refuse to start
    than to run with limits nobody wrote. path None means no file: the empty config.
    """

    def __init__(
        self,
        path: Path | None,
        on_change: Callable[[QueueConfig], None],
        interval_s: float = 1.0,
    ) -> None:
        super().__init__(
            path,
            parse_queue_config,
            QueueConfig(),
            on_change,
            "queue config",
            QueueConfigError,
            log,
            interval_s,
        )
