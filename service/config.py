"""Configuration: documented defaults, then a TOML file, then environment variables
(each later source wins). A secret (the settings in SECRETS) may instead be read from
a file, as container platforms mount secrets: PINLEDGER_<NAME>_FILE.

| variable (PINLEDGER_ + file key)  | default                                               |
|-----------------------------------|-------------------------------------------------------|
| PINLEDGER_CONFIG                  | none: a TOML file with the keys below, lower case     |
| KAFKA                             | 127.0.0.1:19092                                       |
| KAFKA_CLIENT                      | librdkafka, or kafka-python (ledger/adapters.py)      |
| KAFKA_SECURITY_PROTOCOL           | PLAINTEXT, or SSL, SASL_PLAINTEXT, SASL_SSL           |
| KAFKA_SASL_MECHANISM              | none; PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with SASL |
| KAFKA_SASL_USERNAME               | none                                                  |
| KAFKA_SASL_PASSWORD (or _FILE)    | none (a secret: never logged or shown)                |
| KAFKA_SSL_CAFILE                  | none: the system's CAs (PEM)                          |
| KAFKA_SSL_CERTFILE, _KEYFILE      | none: no client certificate (PEM; for mTLS)           |
| KAFKA_SSL_CHECK_HOSTNAME          | true (a broker's certificate must name its host)      |
| STORE_DSN                         | PG_DSN: the projection store; mysql://... for MySQL   |
| STORE_SHARDS                      | none: STORE_DSN is the one shard; set: the shard map  |
|                                   | file (service/store_shards.py; issue 23)              |
| PG_DSN                            | postgresql://pinledger:pinledger@127.0.0.1:54329/pinledger |
| SCHEMA                            | pinledger (the projection's schema; a MySQL database) |
| TOPIC_PREFIX                      | pinledger. (every topic name starts with it)          |
| SERVER_ID                         | <hostname>:<pid>                                      |
| HOST                              | 127.0.0.1 (Thrift bind address)                       |
| PORT                              | 9010 (Thrift, framed transport + binary protocol)     |
| ADVERTISE_HOST                    | HOST, or the hostname when HOST is 0.0.0.0            |
| TLS_CERTFILE, TLS_KEYFILE         | none: the Thrift port is plaintext; set: TLS with     |
|                                   | this certificate and key (PEM)                        |
| TLS_CLIENT_CAFILE                 | none; set: Thrift clients need a certificate signed   |
|                                   | by these CAs (PEM; mTLS)                              |
| TLS_CAFILE                        | none: the system's CAs; what a server forwarding to   |
|                                   | another server's TLS port trusts (PEM)                |
| TLS_CHECK_HOSTNAME                | true (a server's certificate must name the address    |
|                                   | it advertises, for those forwards)                    |
| ADMIN_PORT                        | 9999 (/metrics, /stats.txt, /health; 0 = any free)    |
| PROCESSES                         | 1 (server processes sharing PORT: `serve --processes`) |
| PEER_PORT                         | 0: PORT (the port peers forward dequeues to; with     |
|                                   | PROCESSES > 1 the first of N, 0 = free ones)          |
| FORWARD_QUIET_MS                  | 10 (a peer that had no jobs for a queue is not asked  |
|                                   | again for it this long; 0 = always ask)               |
| ENQUEUE_STICKY_MS                 | 5 (a queue's new jobs go to one partition this long,  |
|                                   | then the next; 0 = round robin per call)              |
| PARTITIONS                        | 4 (partitions of a new queue)                         |
| MAX_PRIORITY                      | 3                                                     |
| MAX_BODY_BYTES                    | 524288                                                |
| MAX_RECORD_BYTES                  | 1000000 (the largest Kafka record written, framing    |
|                                   | included; at most the topics' max.message.bytes)      |
| CLAIM_TIMEOUT_S                   | 600                                                   |
| SUCCEEDED_TTL_S                   | 86400 (24 h)                                          |
| FAILED_TTL_S                      | 604800 (168 h)                                        |
| GC_INTERVAL_S                     | 60                                                    |
| HISTORY_RETENTION_DAYS            | 0: keep timeline rows (job_events) forever            |
| HISTORY_SCAN_RECORDS              | 100000 (most records read for a history from the log) |
| READ_WAIT_S                       | 5 (how long a read waits for read-your-writes)        |
| APPEND_TIMEOUT_S                  | 15 (longest wait for Kafka to take an append; a       |
|                                   | forwarded dequeue is waited for twice this + 5 s)     |
| READY_WINDOW                      | 3000 (ready jobs held in memory per owned partition)  |
| TRACE_QUEUE                       | 10000 (traced jobs whose ended attempts wait to be    |
|                                   | exported; beyond, their live spans are dropped)       |
| RETIRE_AFTER_S                    | 60 (a queue's closed partitions retire once empty     |
|                                   | this long: decision 0030)                             |
| QUEUE_METRICS_INTERVAL_S          | 15 (how often the catalog's owner reads each queue's  |
|                                   | jobs by state for /metrics; 0 = not at all)           |
| QUEUE_METRICS_CAP                 | 10000 (where each of those counts stops: a count at   |
|                                   | the cap means at least that many)                     |
| QUEUE_CONFIG                      | none: no rate limits, no draining partitions          |
| ADMIN_PASSWORD_HASH (or _FILE)    | none: the admin password's scrypt hash (`pinledger    |
|                                   | hash-password`); deleteQueue and the dashboard's      |
|                                   | actions need the password                             |
| ADMIN_PASSWORD_SHA256             | none: PinLater's SHA-256 form instead (with           |
|                                   | ADMIN_SALT); still accepted, with a warning           |
| METRICS_TOKEN (or _FILE)          | none: /metrics and /stats.txt open; set: they need    |
|                                   | `Authorization: Bearer <token>`                       |
| ADMIN_SALT                        | empty                                                 |
| SESSION_TIMEOUT_MS                | 10000 (how soon a dead server's partitions move)      |
| REPLICATION_FACTOR                | 0: the broker's default.replication.factor            |
| MIN_INSYNC_REPLICAS               | 0: the broker's min.insync.replicas                   |
| RETENTION_DAYS                    | 0: keep the ledger forever (retention.ms=-1)          |
| MAX_CONNECTIONS                   | 1024 (Thrift connections served at once)              |
| IDLE_TIMEOUT_S                    | 600 (close a connection idle this long; 0 = never)    |
| MAX_FRAME_BYTES                   | 67108864 (64 MiB: the largest Thrift call accepted)   |

The last three apply to the topics a server creates (a queue's, the catalog); see
docs/decisions/0011-replication-and-retention.md.
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
from pinledger.service.password import AdminPassword, parse_scrypt

DEFAULT_KAFKA = "127.0.0.1:19092"
DEFAULT_PG_DSN = "postgresql://pinledger:pinledger@127.0.0.1:54329/pinledger"
DEFAULT_SCHEMA = "pinledger"
DEFAULT_TOPIC_PREFIX = "pinledger."
# A forwarded dequeue is waited for this much longer than the peer's longest claim
# append: the round trip, and the call's work besides the append.
FORWARD_MARGIN_S = 5.0


class ConfigError(ValueError):
    """A setting has a value pinledger cannot use; the message names it."""


@dataclass(frozen=True, slots=True)
class Config:
    kafka: str = DEFAULT_KAFKA
    # Which Log adapter reaches Kafka: "kafka-python" or "librdkafka"
    # (docs/decisions/0021-librdkafka-adapter.md). Checked where the log is opened
    # (service/assembly.py): this room names no adapter.
    kafka_client: str = "librdkafka"
    # How clients reach Kafka securely (docs/security.md): kafka_security() checks them.
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str = ""
    kafka_sasl_username: str = ""
    kafka_sasl_password: str = dataclasses.field(default="", repr=False)
    kafka_ssl_cafile: str = ""
    kafka_ssl_certfile: str = ""
    kafka_ssl_keyfile: str = ""
    kafka_ssl_check_hostname: bool = True
    # The projection store's DSN: postgresql://... (or a libpq key=value string) or
    # mysql://... (docs/decisions/0016-mysql-store.md). Empty: PG_DSN, the setting's
    # name before MySQL, still accepted.
    store_dsn: str = ""
    # The shard map file (service/store_shards.py); empty: the one store of store_url.
    store_shards: str = ""
    pg_dsn: str = DEFAULT_PG_DSN
    schema: str = DEFAULT_SCHEMA
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    server_id: str = ""
    host: str = "127.0.0.1"
    port: int = 9010
    advertise_host: str = ""
    # TLS on the Thrift port (service/tls.py, docs/security.md).
    tls_certfile: str = ""
    tls_keyfile: str = ""
    tls_client_cafile: str = ""
    tls_cafile: str = ""
    tls_check_hostname: bool = True
    admin_port: int = 9999
    # Server processes on this host sharing `port` (SO_REUSEPORT), each its own owner
    # (docs/decisions/0019-processes.md); 1: this process serves alone.
    processes: int = 1
    # The Thrift port peers forward dequeues to, which this process also listens on and
    # advertises in its member id; 0: `port`. With processes > 1 the workers take
    # peer_port, peer_port + 1, ... (0: ports the OS picks).
    peer_port: int = 0
    # A peer that answered a forwarded dequeue with nothing is not asked again for that
    # queue this long (service/api/forwarding.py); 0: always ask.
    forward_quiet_ms: int = 10
    # A queue's new jobs go to one partition for this long, then to the next, so that
    # concurrent enqueues share records (service/api/enqueue.py); 0: round robin.
    enqueue_sticky_ms: int = 5
    partitions: int = 4
    max_priority: int = 3
    max_body_bytes: int = 512 * 1024
    # The largest Kafka record a server writes (`record_bytes`: value, headers,
    # framing): a call's events are cut into records under it, and a job too big for
    # one record is refused. At most the topics' max.message.bytes; a server lowers it
    # to the catalog topic's at start.
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    claim_timeout_s: float = 600.0
    succeeded_ttl_s: float = 24 * 3600.0
    failed_ttl_s: float = 168 * 3600.0
    gc_interval_s: float = 60.0
    # Timeline rows (job_events) older than this are dropped, a whole day partition at
    # a time; a history whose rows are gone is read from the log (0: keep forever).
    history_retention_days: float = 0.0
    history_scan_records: int = 100_000
    read_wait_s: float = 5.0
    append_timeout_s: float = 15.0
    # Ready jobs (with bodies) an owner holds per partition, all priorities together;
    # the rest wait in Postgres (docs/decisions/0014-ready-window.md).
    ready_window: int = 3000
    trace_queue: int = 10_000
    # A queue's partitions closed by a resize retire once they have held no job this
    # long (docs/decisions/0030-growing-a-queue.md).
    retire_after_s: float = 60.0
    # How often the catalog partition's owner reads each queue's jobs by state and its
    # oldest due job for /metrics (service/observability/queue_gauges.py; 0: never), and
    # where each count stops (decision 0029: the cost is bounded by the cap, not the
    # backlog).
    queue_metrics_interval_s: float = 15.0
    queue_metrics_cap: int = 10_000
    queue_config: str = ""
    # The admin password's stored form (service/password.py): scrypt, from `pinledger
    # hash-password`; or PinLater's SHA-256 of password + salt, still accepted.
    admin_password_hash: str = dataclasses.field(default="", repr=False)
    admin_password_sha256: str = dataclasses.field(default="", repr=False)
    admin_salt: str = dataclasses.field(default="", repr=False)
    # When set, /metrics and /stats.txt answer only `Authorization: Bearer <token>`.
    metrics_token: str = dataclasses.field(default="", repr=False)
    # The dashboard's link from a job's trace id to a trace viewer; {trace_id} is replaced.
    trace_url_template: str = ""
    session_timeout_ms: int = 10_000
    replication_factor: int = 0
    min_insync_replicas: int = 0
    retention_days: float = 0.0
    max_connections: int = 1024
    idle_timeout_s: float = 600.0
    max_frame_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        values: dict[str, Any] = {"server_id": f"{socket.gethostname()}:{os.getpid()}"}
        path = env.get("PINLEDGER_CONFIG")
        if path:
            values.update(_read_file(Path(path)))
        for f in dataclasses.fields(cls):
            raw = env.get(f"PINLEDGER_{f.name.upper()}")
            if raw is not None:
                values[f.name] = raw
            if f.name in SECRETS:
                from_file = _secret_file(env, f.name, raw)
                if from_file is not None:
                    values[f.name] = from_file
        return cls(**{name: _convert(name, value) for name, value in values.items()})

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

# Settings that are secrets: also readable from PINLEDGER_<NAME>_FILE, never shown.
SECRETS = frozenset(
    {
        "kafka_sasl_password",
        "admin_password_hash",
        "admin_password_sha256",
        "admin_salt",
        "metrics_token",
    }
)


def _secret_file(env: Mapping[str, str], name: str, raw: str | None) -> str | None:
    """The secret in the file PINLEDGER_<NAME>_FILE names (its one line, without the
    line end), or None when that variable is not set."""
    variable = f"PINLEDGER_{name.upper()}_FILE"
    path = env.get(variable)
    if path is None:
        return None
    if raw is not None:
        raise ConfigError(f"set PINLEDGER_{name.upper()} or {variable}, not both")
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{variable}={path}: cannot read the secret: {reason}") from None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown setting(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    return data


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
_PORTS = frozenset({"port", "admin_port", "peer_port"})


def _convert(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in dataclasses.fields(Config)}[name]
    what = f"setting {name} (PINLEDGER_{name.upper()})"
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
