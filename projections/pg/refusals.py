"""Why Postgres refused a connection, from libpq's message, and what to check: a wrong
password, a server that takes TLS clients only, a certificate this client does not
trust (docs/security.md). libpq reports a failed connection without an SQLSTATE, so
its text is all there is; it never holds the password.

A refusal reads as one line: "Postgres refused the connection: <why>: <what to
check> (libpq: <its words>)"."""

from __future__ import annotations

import re

# Where a user sets what the advice names: the store's DSN.
DSN = "the store's DSN (PINLEDGER_STORE_DSN, or PINLEDGER_PG_DSN)"

# libpq's words, and what they mean for the user; the first that matches explains.
_CAUSES = (
    (
        "password authentication failed",
        f"the password was refused: check the user and password in {DSN}",
    ),
    (
        # pg_hba.conf: "rejects connection ... no encryption", "no pg_hba.conf entry
        # ... no encryption"
        "no encryption",
        "the server takes TLS connections only and this one did not use TLS: set "
        f"sslmode=verify-full and sslrootcert=<the CA that signed its certificate> in {DSN}",
    ),
    (
        "certificate verify failed",
        "this client does not trust the server's certificate: set sslrootcert in "
        f"{DSN} to the CA that signed it",
    ),
    (
        "does not match host name",
        "the server's certificate does not name the host in the DSN: connect by a name "
        "it holds (sslmode=verify-full checks it), or give the server a certificate "
        "that names this host",
    ),
    (
        "root certificate file",
        "sslmode=verify-ca or verify-full needs the CA that signed the server's "
        f"certificate: set sslrootcert in {DSN} to a readable file holding it (or "
        "sslrootcert=system for the system's CAs)",
    ),
    (
        "server does not support SSL",
        "the server does not offer TLS and the DSN's sslmode requires it: turn ssl on "
        f"in the server, or change sslmode in {DSN}",
    ),
    (
        "pg_hba.conf",
        "the server's pg_hba.conf refuses this client (its address, user or database, "
        "with or without TLS): check the server's pg_hba.conf, or the user and "
        f"database in {DSN}",
    ),
    (
        "SSL error",
        f"the TLS handshake failed: check sslmode, sslrootcert, sslcert and sslkey in {DSN}",
    ),
)


def one_line(text: str) -> str:
    """libpq's message on one line (it adds hints on lines of their own)."""
    return re.sub(r"\s+", " ", text).strip()


def refusal(message: str) -> str | None:
    """What a refused connection's libpq message means and what to check, in one line;
    None when it is no refusal (the server is down or unreachable, say)."""
    for marker, advice in _CAUSES:
        if marker in message:
            said = one_line(message).removeprefix("connection failed: ")
            return f"Postgres refused the connection: {advice} (libpq: {said[:300]})"
    return None
