"""`pinledger doctor`: the Kafka settings that decide whether the ledger is safe (and
whether its topics take the records the servers write), and what to change. Exit
status 1 when a setting is unsafe (an acknowledged job could be lost, or history
deleted, without any further fault), else 0.

It reads the topics of the configured prefix (the catalog and every queue's topic) and
the owners' group, and judges each topic with ledger/durability.py. Of the store it
only checks that its server takes this client (main.py, `check_store`): a refusal
(an untrusted certificate, TLS required, a wrong password) is the one line
`pinledger serve` would stop with.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import asdict
from typing import Protocol

import orjson

from pinledger.ledger.durability import Finding, Severity, findings
from pinledger.ledger.log import (
    Log,
    LogInspector,
    TopicState,
    catalog_topic,
    owners_group,
    queue_of_topic,
)
from pinledger.service.config import Config


class Inspectable(Log, LogInspector, Protocol):
    """A log the doctor can inspect (the Kafka adapter is both)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _retention(ms: int) -> str:
    if ms < 0:
        return "forever"
    return f"{ms / 86_400_000:g} d" if ms >= 86_400_000 else f"{ms / 3_600_000:g} h"


Examined = tuple[int, list[TopicState], list[Finding], int]


def examine(log: Inspectable, prefix: str, record_bytes: int | None = None) -> Examined:
    """(brokers, the prefix's topic states, their findings, live owners); `record_bytes`:
    the largest record the servers write (PINLEDGER_MAX_RECORD_BYTES)."""
    names = {catalog_topic(prefix)} | {
        t for t in log.topics() if queue_of_topic(prefix, t) is not None
    }
    brokers = log.broker_count()
    states = sorted(log.topic_states(names).values(), key=lambda s: s.name)
    found = [f for state in states for f in findings(state, brokers, record_bytes)]
    owners = len(log.group_members(owners_group(prefix)))
    return brokers, states, found, owners


def _grouped(found: list[Finding]) -> list[tuple[Finding, list[str]]]:
    """Findings that say the same thing about several topics, once, with the topics."""
    topics: dict[tuple[Severity, str, str], list[str]] = defaultdict(list)
    first: dict[tuple[Severity, str, str], Finding] = {}
    for f in found:
        key = (f.severity, f.what, f.fix)
        topics[key].append(f.topic)
        first.setdefault(key, f)
    order = list(Severity)
    return sorted(
        ((first[k], topics[k]) for k in first), key=lambda item: order.index(item[0].severity)
    )


def render(bootstrap: str, prefix: str, result: Examined) -> str:
    brokers, states, found, owners = result
    lines = [
        f"Kafka at {bootstrap}: {brokers} broker(s); topic prefix {prefix!r}; "
        f"{owners} server(s) in the owners' group {prefix}owners",
        "",
        f"{'topic':<40} {'partitions':>10} {'replicas':>8} {'min ISR':>7} "
        f"{'retention':>10}  cleanup",
    ]
    for s in states:
        lines.append(
            f"{s.name:<40} {s.partitions:>10} {s.replicas:>8} {s.min_insync_replicas:>7} "
            f"{_retention(s.retention_ms):>10}  {s.cleanup_policy}"
        )
    if not states:
        lines.append("(no topics under this prefix yet: start a server, create a queue)")
    lines.append("")
    for finding, topics in _grouped(found):
        where = topics[0] if len(topics) == 1 else f"{len(topics)} topics"
        lines.append(f"{finding.severity.value:<8} {where}: {finding.what}")
        lines.append(f"{'':<8} fix: {finding.fix}")
    unsafe = sum(f.severity is Severity.UNSAFE for f in found)
    warnings = sum(f.severity is Severity.WARNING for f in found)
    lines.append(f"{unsafe} unsafe, {warnings} warning(s)")
    return "\n".join(lines)


def as_json(result: Examined) -> bytes:
    brokers, states, found, owners = result
    return orjson.dumps(
        {
            "brokers": brokers,
            "owners": owners,
            "topics": [asdict(s) for s in states],
            "findings": [asdict(f) for f in found],
        },
        option=orjson.OPT_INDENT_2,
    )


def run(config: Config, args: argparse.Namespace, log: Inspectable) -> int:
    result = examine(log, config.topic_prefix, config.max_record_bytes)
    if args.json:
        print(as_json(result).decode())
    else:
        print(render(config.kafka, config.topic_prefix, result))
    return 1 if any(f.severity is Severity.UNSAFE for f in result[2]) else 0
