"""What a store's DSN says before any driver is loaded: which database it names, and how
it may be shown (never with its password)."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

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


def passwords(dsn: str) -> list[str]:
    """Every password the DSN holds (in the user part, the query string or key=value
    form), as written and as decoded: for a caller that must make sure none of them is
    in what it prints, whatever a driver's message quotes."""
    if "://" not in dsn:
        found = [m.group(2) for m in _KEYWORD_PASSWORD.finditer(dsn)]
        return [p for raw in found for p in {raw, _unquoted(raw)} if p]
    try:
        url = urlsplit(dsn)
        found = [url.password or ""]
    except ValueError:
        return []
    for parameter in url.query.split("&"):
        key, _, value = parameter.partition("=")
        if "password" in key.lower():
            found.append(value)
    return [p for raw in found for p in {raw, unquote(raw)} if p]


def _unquoted(value: str) -> str:
    """A libpq key=value string's value without its quotes and escapes."""
    if not value.startswith("'"):
        return value
    return re.sub(r"\\(.)", r"\1", value[1:].removesuffix("'"))
