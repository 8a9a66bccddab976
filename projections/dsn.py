"""What a store's DSN says before any driver is loaded: which database it names, and how
it may be shown (never with its password)."""

from __future__ import annotations

from urllib.parse import urlsplit

MYSQL_SCHEME = "mysql://"


def is_mysql(dsn: str) -> bool:
    return dsn.startswith(MYSQL_SCHEME)


def redacted(dsn: str) -> str:
    """The DSN as it may be shown: its password replaced by ***."""
    url = urlsplit(dsn)
    if url.password is None:
        return dsn
    host = url.netloc.rpartition("@")[2]
    return url._replace(netloc=f"{url.username or ''}:***@{host}").geturl()
