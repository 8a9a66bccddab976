"""`pinledger config`: the settings in force, each with where it came from (its default,
the config file, the environment, a secret's file), as a table or `--json`. Secrets are
never shown (***), nor a store DSN's password.

`--check` validates the settings as `pinledger serve` does at its start, without
starting anything or connecting anywhere, and prints one line a problem (exit 1) or
that they are valid (exit 0); `--connect` also asks Kafka and the store (every shard)
whether they take this client.

The values and sources are `load`'s (service/config.py), the loader every command and
the server use; the checks are the functions the server calls at its start.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from pinledger.ledger.log import LogError
from pinledger.projections.dsn import passwords, redacted
from pinledger.projections.factory import check_store
from pinledger.projections.store import StoreError
from pinledger.service.assembly import check_kafka_client, open_log
from pinledger.service.config import (
    DEFAULT_PG_DSN,
    DSNS,
    SECRETS,
    SETTINGS,
    Config,
    ConfigError,
    Loaded,
    load,
)
from pinledger.service.queue_config import QueueConfigWatcher
from pinledger.service.security import tls
from pinledger.service.shards.shard_map import load_shard_map

HIDDEN = "***"
# The widest value column of the table; a longer value pushes its source right.
_VALUE_WIDTH = 56
# A secret shorter than this is not looked for in messages: it would blank out
# ordinary words, and is no secret worth the name.
_SHORTEST_SCRUBBED = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the settings as `serve` does at its start, without starting or "
        "connecting (exit 1: a problem, one line each)",
    )
    parser.add_argument(
        "--connect",
        action="store_true",
        help="with --check (implied): also connect to Kafka and the store",
    )


def shown(name: str, value: Any) -> Any:
    """A setting's value as it may be shown: a secret as *** (empty when not set), a
    DSN without its password."""
    if name in SECRETS:
        return HIDDEN if value else ""
    if name in DSNS and isinstance(value, str):
        return redacted(value)
    return value


class Scrubber:
    """Replaces every secret of the settings (and every password in their DSNs and the
    shard map's) in a problem's message: a driver's message may quote one, this output
    never does. (Values are shown by `shown`'s rules instead: a password that is also
    a common word, as the local stack's is, would blank out the schema and more.)"""

    def __init__(self, values: Mapping[str, Any], dsns: Iterable[str] = ()) -> None:
        found = [str(values[name]) for name in SECRETS if values.get(name)]
        # The store's DSN in force, unless it is the default: the local stack's, whose
        # password is published (and is its user's, schema's and topics' name too).
        in_force = str(values["store_dsn"] or values["pg_dsn"])
        for dsn in [in_force if in_force != DEFAULT_PG_DSN else "", *dsns]:
            found.extend(passwords(dsn))
        # Whole, then each word of it (a message may quote part of a DSN).
        words = [w for secret in found for w in secret.split()]
        self._secrets = sorted(
            {s for s in [*found, *words] if len(s) >= _SHORTEST_SCRUBBED}, key=len, reverse=True
        )

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, HIDDEN)
        return text


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if value != "" else "(empty)"


def render(loaded: Loaded) -> str:
    """The table: setting, value, source."""
    rows = [
        (
            f.name,
            _text(shown(f.name, loaded.values[f.name]))
            + (" (invalid)" if f.name in loaded.invalid else ""),
            str(loaded.sources[f.name]),
        )
        for f in SETTINGS
    ]
    name_width = max(len(name) for name, _, _ in rows)
    value_width = min(_VALUE_WIDTH, max(len(value) for _, value, _ in rows))
    where = f"{loaded.file} (PINLEDGER_CONFIG)" if loaded.file else "none (PINLEDGER_CONFIG)"
    lines = [
        f"config file: {where}",
        f"{'setting':<{name_width}}  {'value':<{value_width}}  source",
    ]
    lines.extend(
        f"{name:<{name_width}}  {value:<{value_width}}  {source}" for name, value, source in rows
    )
    return "\n".join(lines)


def as_json(loaded: Loaded, scrub: Scrubber) -> bytes:
    settings: dict[str, dict[str, Any]] = {}
    for f in SETTINGS:
        source = loaded.sources[f.name]
        entry: dict[str, Any] = {
            "value": shown(f.name, loaded.values[f.name]),
            "source": source.kind,
        }
        if source.variable:
            entry["variable"] = source.variable
        if source.path:
            entry["path"] = source.path
        if f.name in loaded.invalid:
            entry["invalid"] = True
        settings[f.name] = entry
    return orjson.dumps(
        {
            "file": loaded.file or None,
            "settings": settings,
            "problems": [scrub(p) for p in loaded.problems],
        },
        option=orjson.OPT_INDENT_2,
    )


def start_problems(config: Config) -> list[str]:
    """What `pinledger serve` would stop at before it connects anywhere, all of it: each
    check is the one the server makes (service/assembly.py, service/server.py)."""
    # Each with the file it reads, named when its message does not.
    checks: list[tuple[Callable[[], object], str]] = [
        (config.record_limit, ""),
        (config.admin_password, ""),
        (config.kafka_security, ""),
        (lambda: check_kafka_client(config), ""),
        # The Thrift port's TLS, then what forwards to the other servers use (the same
        # certificate: told once when it cannot be used).
        (lambda: (tls.server_context(config), tls.peer_context(config)), ""),
        (lambda: load_shard_map(config.store_shards, config.store_url), config.store_shards),
    ]
    if config.queue_config:
        queues = Path(config.queue_config)
        checks.append((lambda: QueueConfigWatcher(queues, lambda _: None), config.queue_config))
    problems = []
    for check, path in checks:
        try:
            check()
        except ValueError as exc:  # ConfigError, ShardMapError, QueueConfigError
            said = _one_line(str(exc))
            problems.append(said if not path or path in said else f"{path}: {said}")
    return problems


def connect(config: Config) -> tuple[list[str], list[str]]:
    """(problems, what was reached): each store shard takes this client, Kafka answers."""
    problems: list[str] = []
    reached: list[str] = []
    for shard in load_shard_map(config.store_shards, config.store_url).shards:
        store = f"store shard {shard.name}" if config.store_shards else "store"
        try:
            check_store(shard.dsn)
        except StoreError as exc:
            problems.append(f"{store}: {_one_line(str(exc))}")
        else:
            reached.append(f"{store} at {redacted(shard.dsn)}: takes this client")
    try:
        log = open_log(config, client_id="pinledger-config")
        try:
            brokers = log.broker_count()
        finally:
            log.close()
    except (LogError, ConfigError) as exc:
        problems.append(f"Kafka at {config.kafka}: {_one_line(str(exc))}")
    else:
        reached.append(f"Kafka at {config.kafka}: {brokers} broker(s) answered")
    return problems, reached


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _summary(loaded: Loaded) -> str:
    kinds = Counter(source.kind for source in loaded.sources.values())
    parts = [
        f"{kinds['file']} from {loaded.file}" if loaded.file else "",
        f"{kinds['env']} from the environment" if kinds["env"] else "",
        f"{kinds['secret_file']} from secret files" if kinds["secret_file"] else "",
    ]
    said = ", ".join(p for p in parts if p)
    if not said:
        return f"{len(SETTINGS)} settings, all defaults"
    return f"{len(SETTINGS)} settings: {said}, the rest defaults"


def _check(loaded: Loaded, args: argparse.Namespace) -> int:
    problems = list(loaded.problems)
    reached: list[str] = []
    dsns: list[str] = []
    if not problems:
        config = loaded.checked()
        problems = start_problems(config)
        if not problems and config.store_shards:
            dsns = [s.dsn for s in load_shard_map(config.store_shards, config.store_url).shards]
        if not problems and args.connect:
            problems, reached = connect(config)
    scrub = Scrubber(loaded.values, dsns)
    problems = [scrub(p) for p in problems]
    if args.json:
        answer: dict[str, Any] = {"valid": not problems, "problems": problems}
        if args.connect:
            answer["reached"] = reached
        print(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode())
    else:
        for problem in problems:
            print(f"pinledger config: {problem}", file=sys.stderr)
        for line in reached:
            print(line)
        if not problems:
            print(f"valid: {_summary(loaded)}")
    return 1 if problems else 0


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    """`env`: the environment to read (default: this process's)."""
    loaded = load(env)
    if args.check or args.connect:
        return _check(loaded, args)
    scrub = Scrubber(loaded.values)
    if args.json:
        print(as_json(loaded, scrub).decode())
    else:
        print(render(loaded))
        for problem in loaded.problems:
            print(f"pinledger config: {scrub(problem)}", file=sys.stderr)
    return 1 if loaded.problems else 0
