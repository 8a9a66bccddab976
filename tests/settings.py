"""The servers every test talks to, in one place: the PINLEDGER_* settings of the
environment when set, else the local stack's defaults (`make stack-up`), so that
`make test` in a shell with no PINLEDGER_* variables runs against the stack it started.

Kafka and Postgres come from `Config.from_env()` (the server's own defaults); the MySQL
store's tests have no server setting of their own, so its default lives here.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from pinledger.service.config import Config

# The stack's MariaDB (stack/stack.sh up prints it as PINLEDGER_MYSQL_DSN).
DEFAULT_MYSQL_DSN = "mysql://pinledger:pinledger@127.0.0.1:33069/pinledger"


@dataclass(frozen=True, slots=True)
class StackSettings:
    kafka: str
    pg_dsn: str
    mysql_dsn: str


@functools.cache
def stack_settings() -> StackSettings:
    config = Config.from_env()
    return StackSettings(
        kafka=config.kafka,
        pg_dsn=config.pg_dsn,
        mysql_dsn=os.environ.get("PINLEDGER_MYSQL_DSN") or DEFAULT_MYSQL_DSN,
    )
