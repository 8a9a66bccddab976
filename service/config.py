"""Configuration: documented defaults, overridden by environment variables.

| variable                 | default                                                  |
|--------------------------|----------------------------------------------------------|
| PINLEDGER_KAFKA          | 127.0.0.1:19092 (the broker `make stack-up` starts)      |
| PINLEDGER_PG_DSN         | postgresql://pinledger:pinledger@127.0.0.1:54329/pinledger |
| PINLEDGER_SCHEMA         | pinledger (the live projection's Postgres schema)        |
| PINLEDGER_TOPIC_PREFIX   | pinledger. (every topic name starts with it)             |
| PINLEDGER_SERVER_ID      | <hostname>:<pid> (recorded as the actor's server)        |
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_KAFKA = "127.0.0.1:19092"
DEFAULT_PG_DSN = "postgresql://pinledger:pinledger@127.0.0.1:54329/pinledger"
DEFAULT_SCHEMA = "pinledger"
DEFAULT_TOPIC_PREFIX = "pinledger."


@dataclass(frozen=True, slots=True)
class Config:
    kafka: str = DEFAULT_KAFKA
    pg_dsn: str = DEFAULT_PG_DSN
    schema: str = DEFAULT_SCHEMA
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    server_id: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        return cls(
            kafka=env.get("PINLEDGER_KAFKA", DEFAULT_KAFKA),
            pg_dsn=env.get("PINLEDGER_PG_DSN", DEFAULT_PG_DSN),
            schema=env.get("PINLEDGER_SCHEMA", DEFAULT_SCHEMA),
            topic_prefix=env.get("PINLEDGER_TOPIC_PREFIX", DEFAULT_TOPIC_PREFIX),
            server_id=env.get("PINLEDGER_SERVER_ID", f"{socket.gethostname()}:{os.getpid()}"),
        )
