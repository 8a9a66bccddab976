"""What a store's DSN says before any driver is loaded: which database it names, and how
it may be shown (never with its password)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MYSQL_SCHEME = "mysql://"

# A libpq key=value string's password (and sslpassword, the client key's): a value in
# single quotes (with \' and \\ inside; unterminated, to the end), or up to a space.
_KEYWORD_PASSWORD = re.compile(
    r"(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*(?:'|$)|\S*)", re.IGNORECASE
)


def is_mysql(dsn: str) -> bool:
    return dsn.startswith(MYSQL_SCHEME)


def redacted(dsn: str) -> str:
    """The DSN as it may be shown: its password replaced by ***, whether in a URL's user
    part, in its query string (?password=..., ?sslpassword=...) or in a libpq key=value
    string (password=...)."""
    if "://" not in dsn:
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    try:
        url = urlsplit(dsn)
        password = url.password
    except ValueError:
        # Not even a URL's parts could be told apart: nothing of it is safe to show.
        return f"{dsn.partition('://')[0]}://*** (not a valid URL)"
    netloc = url.netloc
    if password is not None:
        netloc = f"{url.username or ''}:***@{netloc.rpartition('@')[2]}"
    query = "&".join(_redacted_parameter(p) for p in url.query.split("&")) if url.query else ""
    if (netloc, query) == (url.netloc, url.query):
        return dsn
    return url._replace(netloc=netloc, query=query).geturl()


def _redacted_parameter(parameter: str) -> str:
    key, equals, _ = parameter.partition("=")
    return f"{key}=***" if equals and "password" in key.lower() else parameter
