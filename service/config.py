"""Configuration: documented defaults, then a TOML file, then environment variables
(each later source wins). A secret may instead be read from a file, as container
platforms mount secrets: PINLEDGER_<NAME>_FILE.

- The file is the one PINLEDGER_CONFIG names: TOML, each key a setting's name (lower
  case, without the prefix), e.g. `port = 9010`. An unknown key is refused.
- A setting's environment variable is PINLEDGER_ and its name in upper case.

Each setting is a field of `Config` declared with `_setting`: its default and what it
does, written once here. The settings reference (docs/reference/settings.md) is
generated from them (service/config_reference.py), and `load` is the one reader of the
sources: `Config.from_env` (every command, the server) and `pinledger config`, which
shows each setting's value and where it came from, both go through it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinledger.ledger import limits
from pinledger.ledger.group_commit import longest_append_s
from pinledger.ledger.log import (
    DEFAULT_MAX_RECORD_BYTES,
    PRODUCER_MAX_RECORD_BYTES,
    PROTOCOLS,
    SASL_MECHANISMS,
    KafkaSecurity,
    TopicPolicy,
)
from pinledger.service.security.password import AdminPassword, parse_scrypt

DEFAULT_KAFKA = "127.0.0.1:19092"
DEFAULT_PG_DSN = "postgresql://pinledger:pinledger@127.0.0.1:54329/pinledger"
DEFAULT_SCHEMA = "pinledger"
DEFAULT_TOPIC_PREFIX = "pinledger."
# A forwarded dequeue is waited for this much longer than the peer's longest claim
# append: the round trip, and the call's work besides the append.
FORWARD_MARGIN_S = 5.0
# Owner.stop joins its threads within this much in all: the owner loop 10 s, the
# duty scheduler's lanes 5 s together, the live-traces thread 5 s.
OWNER_JOINS_S = 10.0 + 5.0 + 5.0
# Leaving the owners' group and closing the log, once the owner has stopped.
STOP_MARGIN_S = 5.0
ENV_PREFIX = "PINLEDGER_"
# The environment variable naming the config file.
CONFIG_VARIABLE = "PINLEDGER_CONFIG"


class ConfigError(ValueError):
    """A setting has a value pinledger cannot use; the message names it."""


def _setting(
    default: Any, doc: str, *, secret: bool = False, dsn: bool = False, computed: str = ""
) -> Any:
    """A field of `Config`: its default and `doc`, what it does (the settings reference
    prints it). `secret`: never shown (nor in repr), and also read from
    PINLEDGER_<NAME>_FILE; `dsn`: a store DSN, shown without its password; `computed`:
    what `load` sets instead of the default, in words."""
    return dataclasses.field(
        default=default,
        repr=not secret,
        metadata={
            "doc": " ".join(doc.split()),
            "secret": secret,
            "dsn": dsn,
            "computed": computed,
        },
    )


@dataclass(frozen=True, slots=True)
class Config:
    kafka: str = _setting(DEFAULT_KAFKA, "The Kafka brokers to bootstrap from (host:port, ...).")
    kafka_client: str = _setting(
        "librdkafka",
        """The Kafka client of the log: `librdkafka` (confluent-kafka: appends and readers
        in C, about half the CPU per job) or `kafka-python`. The owners' group and the
        admin calls use kafka-python with either, so servers on both share one group
        (docs/decisions/0021-librdkafka-adapter.md).""",
    )
    kafka_security_protocol: str = _setting(
        "PLAINTEXT",
        """How clients reach Kafka: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`
        (docs/security.md).""",
    )
    kafka_sasl_mechanism: str = _setting(
        "", "With a `SASL_*` protocol: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`."
    )
    kafka_sasl_username: str = _setting(
        "", "With a `SASL_*` protocol: the user pinledger logs in as."
    )
    kafka_sasl_password: str = _setting(
        "", "With a `SASL_*` protocol: that user's password.", secret=True
    )
    kafka_ssl_cafile: str = _setting(
        "", "The CA certificates (PEM) a broker's certificate must chain to; empty: the system's."
    )
    kafka_ssl_certfile: str = _setting(
        "", "The client certificate (PEM) for brokers that require one (mTLS); empty: none."
    )
    kafka_ssl_keyfile: str = _setting("", "The client certificate's key (PEM).")
    kafka_ssl_check_hostname: bool = _setting(
        True, "A broker's certificate must name the host it is reached at."
    )
    store_dsn: str = _setting(
        "",
        """The projection store: `postgresql://...` (or a libpq key=value string) or
        `mysql://user:password@host:port/database` (docs/decisions/0016-mysql-store.md),
        TLS options included. Empty: `pg_dsn`, the setting's name before MySQL, still
        accepted.""",
        dsn=True,
    )
    store_shards: str = _setting(
        "",
        """The shard map file (JSON, service/shards/shard_map.py,
        docs/decisions/0031-storage-shards.md); empty: `store_dsn` is the one store.""",
    )
    pg_dsn: str = _setting(DEFAULT_PG_DSN, "The store when `store_dsn` is empty.", dsn=True)
    schema: str = _setting(DEFAULT_SCHEMA, "The live projection's schema (on MySQL, its database).")
    topic_prefix: str = _setting(
        DEFAULT_TOPIC_PREFIX, "Every topic name of this cluster starts with it."
    )
    server_id: str = _setting(
        "",
        "This server's name in every record it appends and every claim it makes.",
        computed="<hostname>:<pid>",
    )
    host: str = _setting("127.0.0.1", "The Thrift port's bind address.")
    port: int = _setting(9010, "The Thrift port (framed transport, binary protocol).")
    advertise_host: str = _setting(
        "",
        """The host other servers reach this one at (forwarded dequeues); empty: `host`,
        or the hostname when `host` is 0.0.0.0.""",
    )
    tls_certfile: str = _setting(
        "",
        """The Thrift port's certificate (PEM): set, the port speaks TLS (and the admin
        port https); empty: plaintext (docs/security.md).""",
    )
    tls_keyfile: str = _setting("", "The key of `tls_certfile` (PEM).")
    tls_client_cafile: str = _setting(
        "",
        """Set: Thrift clients need a certificate signed by these CAs (PEM; mutual TLS).""",
    )
    tls_cafile: str = _setting(
        "",
        """What a server trusts in the other servers' TLS ports it forwards dequeues to
        (PEM); empty: the system's CAs.""",
    )
    tls_check_hostname: bool = _setting(
        True,
        """A server's certificate must name the address it advertises (for forwarded
        dequeues).""",
    )
    admin_port: int = _setting(
        9999,
        """The admin HTTP port: /metrics, /stats.txt, /health, /ready and the dashboard;
        0: any free port.""",
    )
    processes: int = _setting(
        1,
        """Server processes on this host sharing `port` (SO_REUSEPORT), each an owner of
        its own, as `serve --processes` (docs/decisions/0019-processes.md).""",
    )
    peer_port: int = _setting(
        0,
        """The port other servers forward dequeues to, which this process also listens on
        and advertises; 0: `port`. With `processes` > 1 the processes take `peer_port`,
        `peer_port` + 1, ... (0: ports the OS picks).""",
    )
    liveness: bool = _setting(
        True,
        """Watch the other servers' processes: one whose process is gone is removed from
        the owners' group at once, and its partitions move in a fraction of a second
        instead of at `session_timeout_ms` (docs/decisions/0039-failover.md). Off: a
        dead server is noticed at its session timeout.""",
    )
    liveness_port: int = _setting(
        0,
        """The port of this process's liveness listener, which the other servers hold a
        connection to (it must be reachable from them, at the host of the address this
        server advertises); 0: any free port. With `processes` > 1 the processes take
        `liveness_port`, `liveness_port` + 1, ... (0: ports the OS picks).""",
    )
    forward_quiet_ms: int = _setting(
        10,
        """A peer that answered a forwarded dequeue with no jobs is not asked again for
        that queue this long; 0: always ask.""",
    )
    enqueue_sticky_ms: int = _setting(
        5,
        """A queue's new jobs go to one partition this long, then to the next, so that
        concurrent enqueues share Kafka records; 0: round robin per call.""",
    )
    partitions: int = _setting(4, "Partitions of a new queue (1: strict FIFO).")
    max_priority: int = _setting(3, "Priorities run from 1 (the highest) to this.")
    max_body_bytes: int = _setting(
        512 * 1024, "The largest job body accepted; a larger one is `ENQUEUE_REJECTED`."
    )
    max_record_bytes: int = _setting(
        DEFAULT_MAX_RECORD_BYTES,
        """The largest Kafka record a server writes (value, headers, framing): a call's
        events are cut into records under it, and a job too big for one record is
        refused. At most the topics' `max.message.bytes` (a server lowers it to the catalog
        topic's at start), and room for a job of `max_body_bytes` in base64.""",
    )
    claim_timeout_s: float = _setting(
        600.0, "A claimed job neither acked nor checkpointed this long is retried (or FAILED)."
    )
    succeeded_ttl_s: float = _setting(
        24 * 3600.0, "How long a SUCCEEDED job stays in the tables (its history stays in the log)."
    )
    failed_ttl_s: float = _setting(
        168 * 3600.0, "How long a FAILED job stays in the tables (its history stays in the log)."
    )
    gc_interval_s: float = _setting(
        60.0, "How often an owner removes expired jobs and checks claim timeouts."
    )
    history_retention_days: float = _setting(
        0.0,
        """Timeline rows (`job_events`) older than this are dropped, a whole day partition at
        a time; a history whose rows are gone is read from the log. 0: keep forever.""",
    )
    history_scan_records: int = _setting(
        100_000, "The most log records one history read from the log reads before it stops."
    )
    read_wait_s: float = _setting(
        5.0, "How long a read waits for the projection to show the caller's writes."
    )
    append_timeout_s: float = _setting(
        15.0,
        """The longest a call waits for Kafka to take its append; past it the call fails
        with `SHARD_CONNECTION_FAILED`. A forwarded dequeue is waited for twice this plus
        5 s.""",
    )
    ready_window: int = _setting(
        3000,
        """Ready jobs (with bodies) an owner holds in memory per partition, all priorities
        together; the rest wait in the store (docs/decisions/0014-ready-window.md).""",
    )
    trace_queue: int = _setting(
        10_000,
        """Traced jobs whose ended attempts wait to be exported; beyond it their live spans
        are dropped and counted.""",
    )
    retire_after_s: float = _setting(
        60.0,
        """A queue's partitions closed by a resize retire once they have held no job this
        long (docs/decisions/0030-growing-a-queue.md).""",
    )
    queue_metrics_interval_s: float = _setting(
        15.0,
        """How often the catalog partition's owner reads each queue's jobs by state and
        its oldest due job for /metrics (pinledger_queue_jobs,
        pinledger_queue_oldest_ready_seconds; service/ownership/maintenance/queue_gauges.py);
        0: never.""",
    )
    queue_metrics_cap: int = _setting(
        10_000,
        """Where each of those counts stops (a count at the cap means at least that
        many): their cost is bounded by the cap, not by the backlog
        (docs/decisions/0029-dashboard-overview-counts.md).""",
    )
    queue_config: str = _setting(
        "",
        """The queue-config JSON file: rate limits, partition counts, draining partitions
        (service/queue_config.py), re-read when it changes; empty: none.""",
    )
    admin_password_hash: str = _setting(
        "",
        """The admin password's scrypt hash (`pinledger hash-password`): deleteQueue and
        the dashboard's actions need the password; empty, and no `admin_password_sha256`:
        they are refused.""",
        secret=True,
    )
    admin_password_sha256: str = _setting(
        "",
        """PinLater's form of the admin password instead: the hex SHA-256 of password +
        `admin_salt`. Still accepted, with a warning at start.""",
        secret=True,
    )
    admin_salt: str = _setting("", "The salt of `admin_password_sha256`.", secret=True)
    metrics_token: str = _setting(
        "",
        """Set: /metrics and /stats.txt answer only `Authorization: Bearer <token>`;
        empty: they are open.""",
        secret=True,
    )
    trace_url_template: str = _setting(
        "",
        """The dashboard links a job's trace id to a trace viewer: `{trace_id}` is
        replaced, e.g. `https://jaeger.example/trace/{trace_id}`; empty: no link.""",
    )
    session_timeout_ms: int = _setting(
        10_000, "How soon a dead server's partitions move to the others."
    )
    replication_factor: int = _setting(
        0,
        """Replicas of each topic a server creates; 0: the broker's
        `default.replication.factor` (docs/decisions/0011-replication-and-retention.md).""",
    )
    min_insync_replicas: int = _setting(
        0,
        """Replicas an append must reach before it is acknowledged, for the topics a server
        creates; 0: the broker's `min.insync.replicas`.""",
    )
    retention_days: float = _setting(
        0.0,
        """How long Kafka keeps the ledger, for the topics a server creates; 0: forever
        (`retention.ms=-1`).""",
    )
    max_connections: int = _setting(
        1024, "Thrift connections served at once; past it a call is refused as busy."
    )
    idle_timeout_s: float = _setting(
        600.0, "A Thrift connection that sends nothing this long is closed; 0: never."
    )
    max_frame_bytes: int = _setting(
        64 * 1024 * 1024,
        "The largest Thrift call accepted; a larger enqueue is `ENQUEUE_REJECTED`.",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        """The settings of `env` (default: this process's environment) and the file it
        names; a ConfigError names the first setting that cannot be used."""
        return load(env).checked()

    def admin_password(self) -> AdminPassword:
        """The configured admin password, checked: a ConfigError names what is wrong."""
        if self.admin_password_hash and self.admin_password_sha256:
            raise ConfigError(
                "set PINLEDGER_ADMIN_PASSWORD_HASH or PINLEDGER_ADMIN_PASSWORD_SHA256, not both"
            )
        if self.admin_password_hash:
            try:
                parse_scrypt(self.admin_password_hash)
            except ValueError as exc:
                raise ConfigError(
                    f"PINLEDGER_ADMIN_PASSWORD_HASH cannot be used: {exc}; make one with "
                    "`pinledger hash-password`"
                ) from None
        return AdminPassword(
            scrypt=self.admin_password_hash,
            sha256=self.admin_password_sha256,
            salt=self.admin_salt,
        )

    def kafka_security(self) -> KafkaSecurity:
        """The Kafka security settings, checked: a ConfigError names the setting that is
        missing or wrong (never a secret's value)."""
        protocol = self.kafka_security_protocol.upper()
        if protocol not in PROTOCOLS:
            raise ConfigError(
                f"setting kafka_security_protocol (PINLEDGER_KAFKA_SECURITY_PROTOCOL) must "
                f"be one of {', '.join(PROTOCOLS)}, got {self.kafka_security_protocol!r}"
            )
        mechanism = self.kafka_sasl_mechanism.upper()
        if protocol.startswith("SASL_"):
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(
                    f"PINLEDGER_KAFKA_SECURITY_PROTOCOL={protocol} needs "
                    f"PINLEDGER_KAFKA_SASL_MECHANISM, one of {', '.join(SASL_MECHANISMS)} "
                    f"(got {self.kafka_sasl_mechanism!r})"
                )
            if not self.kafka_sasl_username or not self.kafka_sasl_password:
                raise ConfigError(
                    f"PINLEDGER_KAFKA_SECURITY_PROTOCOL={protocol} needs "
                    "PINLEDGER_KAFKA_SASL_USERNAME and PINLEDGER_KAFKA_SASL_PASSWORD (or "
                    "PINLEDGER_KAFKA_SASL_PASSWORD_FILE)"
                )
        elif mechanism or self.kafka_sasl_username or self.kafka_sasl_password:
            raise ConfigError(
                f"PINLEDGER_KAFKA_SASL_* are set but PINLEDGER_KAFKA_SECURITY_PROTOCOL is "
                f"{protocol}: set it to SASL_SSL (or SASL_PLAINTEXT) to log in with them"
            )
        files = {
            "PINLEDGER_KAFKA_SSL_CAFILE": self.kafka_ssl_cafile,
            "PINLEDGER_KAFKA_SSL_CERTFILE": self.kafka_ssl_certfile,
            "PINLEDGER_KAFKA_SSL_KEYFILE": self.kafka_ssl_keyfile,
        }
        named = {name: path for name, path in files.items() if path}
        if named and protocol not in ("SSL", "SASL_SSL"):
            raise ConfigError(
                f"{', '.join(named)} set but PINLEDGER_KAFKA_SECURITY_PROTOCOL is {protocol}: "
                "set it to SSL or SASL_SSL to use TLS"
            )
        if bool(self.kafka_ssl_certfile) != bool(self.kafka_ssl_keyfile):
            raise ConfigError(
                "a client certificate needs both PINLEDGER_KAFKA_SSL_CERTFILE and "
                "PINLEDGER_KAFKA_SSL_KEYFILE"
            )
        for name, path in named.items():
            if not os.access(path, os.R_OK):
                raise ConfigError(f"{name}={path}: no such file, or not readable by this user")
        return KafkaSecurity(
            protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=self.kafka_sasl_username,
            sasl_password=self.kafka_sasl_password,
            ssl_cafile=self.kafka_ssl_cafile,
            ssl_certfile=self.kafka_ssl_certfile,
            ssl_keyfile=self.kafka_ssl_keyfile,
            ssl_check_hostname=self.kafka_ssl_check_hostname,
        )

    def record_limit(self) -> int:
        """The largest record a server writes, checked: no more than the producers send,
        and room for a job of the largest body (in base64) with its envelope."""
        what = f"PINLEDGER_MAX_RECORD_BYTES={self.max_record_bytes}"
        if self.max_record_bytes > PRODUCER_MAX_RECORD_BYTES:
            raise ConfigError(
                f"{what} is over the {PRODUCER_MAX_RECORD_BYTES} bytes the Kafka producers "
                "send: lower it"
            )
        needed = -(-self.max_body_bytes // 3) * 4 + _JOB_ENVELOPE_BYTES
        if needed > self.max_record_bytes:
            raise ConfigError(
                f"{what} leaves no room for a job of PINLEDGER_MAX_BODY_BYTES="
                f"{self.max_body_bytes}, which takes up to {needed} bytes in a record (the "
                "body grows by 4/3 in base64, plus its custom status and envelope): raise "
                "it, with the topics' max.message.bytes, or lower PINLEDGER_MAX_BODY_BYTES"
            )
        return self.max_record_bytes

    def topic_policy(self) -> TopicPolicy:
        """How this server creates topics (0 leaves a setting to the broker)."""
        return TopicPolicy(
            replication_factor=self.replication_factor or None,
            min_insync_replicas=self.min_insync_replicas or None,
            retention_ms=round(self.retention_days * 86_400_000) if self.retention_days else -1,
        )

    @property
    def store_url(self) -> str:
        """The projection store's DSN: STORE_DSN when set, else PG_DSN."""
        return self.store_dsn or self.pg_dsn

    @property
    def claim_append_s(self) -> float:
        """The longest a dequeue's claim append takes before it answers or fails (group
        commit behind the appends in flight to its partition, then its own; each
        within APPEND_TIMEOUT_S)."""
        return longest_append_s(self.append_timeout_s)

    @property
    def forward_timeout_s(self) -> float:
        """How long a server waits for a peer's answer to a forwarded dequeue: longer
        than the peer's longest claim append, so that a peer never claims jobs for a
        forward that has given up (the claims would land with no worker to run them,
        and a one-attempt job would fail at its claim timeout without having run)."""
        return self.claim_append_s + FORWARD_MARGIN_S

    @property
    def stop_s(self) -> float:
        """The longest a graceful stop takes (Server.stop): the owner's threads joined
        while the claims in flight land (claim_append_s) and the owners' group left,
        then each connection's next call answered (the linger, 1 s: inside the margin),
        then the calls still in flight answered (forward_timeout_s) and the log closed.
        `serve --processes`' supervisor waits this long before it kills a process; the
        chart's grace period and the systemd unit's TimeoutStopSec cover it."""
        return self.forward_timeout_s + max(self.claim_append_s, OWNER_JOINS_S) + STOP_MARGIN_S

    @property
    def address(self) -> str:
        """host:port other servers reach this server's Thrift port at: its peer port
        when it has one (a worker of `serve --processes`), else its port."""
        host = self.advertise_host or (
            socket.gethostname() if self.host in ("0.0.0.0", "") else self.host
        )
        return f"{host}:{self.peer_port or self.port}"


# Room in a record for a job's custom status (5,000 characters, up to 6 bytes each
# when escaped), its caller and the envelope, beyond its body in base64.
_JOB_ENVELOPE_BYTES = 64 * 1024

SETTINGS: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(Config)
# Settings that are secrets: also readable from PINLEDGER_<NAME>_FILE, never shown.
SECRETS = frozenset(f.name for f in SETTINGS if f.metadata["secret"])
# Settings that are store DSNs: shown without their password.
DSNS = frozenset(f.name for f in SETTINGS if f.metadata["dsn"])


def variable(name: str) -> str:
    """The environment variable of the setting `name`."""
    return f"{ENV_PREFIX}{name.upper()}"


@dataclass(frozen=True, slots=True)
class Source:
    """Where a setting's value came from: `kind` is "default", "file" (`path`: the
    config file), "env" (`variable`) or "secret_file" (`variable`: PINLEDGER_<NAME>_FILE,
    `path`: the file it names)."""

    kind: str
    variable: str = ""
    path: str = ""

    def __str__(self) -> str:
        if self.kind == "env":
            return f"env {self.variable}"
        if self.kind == "file":
            return f"file {self.path}"
        if self.kind == "secret_file":
            return f"secret file {self.path} ({self.variable})"
        return self.kind


_DEFAULT = Source("default")


@dataclass(frozen=True, slots=True)
class Loaded:
    """The settings as `load` read them: every setting's value (converted; one that
    could not be, as given) and source, the config file's path ("" when none), and what
    is wrong, one message a problem."""

    values: Mapping[str, Any]
    sources: Mapping[str, Source]
    file: str
    problems: tuple[str, ...]
    # The settings whose value could not be converted (kept as given in `values`).
    invalid: frozenset[str] = frozenset()

    def checked(self) -> Config:
        """The Config; a ConfigError with the first problem when there is one."""
        if self.problems:
            raise ConfigError(self.problems[0])
        return Config(**self.values)


def load(env: Mapping[str, str] | None = None) -> Loaded:
    """Every setting from the defaults, then the file PINLEDGER_CONFIG names, then
    `env` (default: this process's environment), each later source winning, and where
    each came from. Reads on past a problem, so that all of them are told at once."""
    env = os.environ if env is None else env
    problems: list[str] = []
    given: dict[str, Any] = {"server_id": f"{socket.gethostname()}:{os.getpid()}"}
    sources: dict[str, Source] = {"server_id": _DEFAULT}
    path = env.get(CONFIG_VARIABLE) or ""
    if path:
        from_file = _read_file(Path(path), problems)
        given.update(from_file)
        sources.update(dict.fromkeys(from_file, Source("file", path=path)))
    for f in SETTINGS:
        raw = env.get(variable(f.name))
        if raw is not None:
            given[f.name], sources[f.name] = raw, Source("env", variable(f.name))
        if f.name in SECRETS:
            try:
                secret = _secret_file(env, f.name, raw)
            except ConfigError as exc:
                problems.append(str(exc))
                continue
            if secret is not None:
                given[f.name], sources[f.name] = secret
    values: dict[str, Any] = {}
    invalid: set[str] = set()
    for f in SETTINGS:
        if f.name not in given:
            values[f.name], sources[f.name] = f.default, _DEFAULT
            continue
        try:
            values[f.name] = _convert(f.name, given[f.name], sources[f.name])
        except ConfigError as exc:
            problems.append(str(exc))
            values[f.name] = given[f.name]
            invalid.add(f.name)
    return Loaded(values, sources, path, tuple(problems), frozenset(invalid))


def _secret_file(env: Mapping[str, str], name: str, raw: str | None) -> tuple[str, Source] | None:
    """The secret in the file PINLEDGER_<NAME>_FILE names (its one line, without the
    line end) and that source, or None when that variable is not set."""
    named = f"{variable(name)}_FILE"
    path = env.get(named)
    if path is None:
        return None
    if raw is not None:
        raise ConfigError(f"set {variable(name)} or {named}, not both")
    try:
        secret = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{named}={path}: cannot read the secret: {reason}") from None
    return secret, Source("secret_file", named, path)


def _read_file(path: Path, problems: list[str]) -> dict[str, Any]:
    """The settings of the config file; what is wrong with it goes to `problems` (an
    unknown key is refused, the known ones are still read)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        problems.append(f"cannot read config file {path}: {exc.strerror}")
        return {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"config file {path} is not valid TOML: {exc}")
        return {}
    known = {f.name for f in SETTINGS}
    unknown = sorted(set(data) - known)
    if unknown:
        problems.append(
            f"config file {path}: unknown setting(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    return {key: value for key, value in data.items() if key in known}


# Settings that must be at least 1 (0 would make the server unusable), and ports.
_AT_LEAST_ONE = frozenset(
    {
        "partitions",
        "max_priority",
        "session_timeout_ms",
        "max_connections",
        "max_frame_bytes",
        "max_record_bytes",
        "history_scan_records",
        "append_timeout_s",
        "ready_window",
        "trace_queue",
        "processes",
        "queue_metrics_cap",
    }
)
_PORTS = frozenset({"port", "admin_port", "peer_port", "liveness_port"})


def _convert(name: str, value: Any, source: Source) -> Any:
    kind = {f.name: f.type for f in SETTINGS}[name]
    # Named as it was given: the variable, or the file that holds the value.
    origin = f"in {source.path}" if source.kind == "file" else source.variable or variable(name)
    what = f"setting {name} ({origin})"
    if name == "server_id":
        # In every record this server appends and every claim it makes: held to the
        # rules of what a request may carry (ledger/limits.py).
        wrong = limits.problem(limits.SERVER_ID, value)
        if wrong is not None:
            raise ConfigError(f"{what} {wrong}")
    if kind == "bool":
        return _boolean(what, value)
    number: float
    try:
        if kind == "int":
            number = int(value)
        elif kind == "float":
            number = float(value)
        else:
            return str(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what} must be a number ({kind}), got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    if number < 0:
        raise ConfigError(f"{what} must not be negative, got {value!r}")
    if name in _AT_LEAST_ONE and number < 1:
        raise ConfigError(f"{what} must be at least 1, got {value!r}")
    if name in _PORTS and number > 65535:
        raise ConfigError(f"{what} must be a TCP port (0-65535), got {value!r}")
    return number


def _boolean(what: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{what} must be true or false, got {value!r}")
