"""Why MariaDB/MySQL refused a connection, from the driver's error, and what to check: a
wrong password, a server that takes TLS clients only, a certificate this client does not
trust (docs/security.md). The driver's message never holds the password.

MariaDB refuses a client without TLS under `require_secure_transport` with the same
"Access denied" as a wrong password (MySQL 8 says so with an error of its own, 3159): a
refused login without TLS names both causes.

A refusal reads as one line: "MariaDB/MySQL refused the connection: <why>: <what to check>
(<the driver's words>)"."""

from __future__ import annotations

import re

from pinledger.projections.mysql.tls import MyTls

DSN = "the store's DSN (PINLEDGER_STORE_DSN)"

ER_DATABASE_ACCESS_DENIED = 1044
ER_ACCESS_DENIED = 1045
ER_SECURE_TRANSPORT_REQUIRED = 3159
CR_CONN_HOST_ERROR = 2003
CR_SSL_CONNECTION_ERROR = 2026

_USE_TLS = f"set ssl-mode=VERIFY_IDENTITY and ssl-ca=<the CA that signed its certificate> in {DSN}"


def _cause(code: int | None, message: str, tls: MyTls) -> str | None:
    if code == ER_SECURE_TRANSPORT_REQUIRED:
        return f"the server takes TLS connections only and this one did not use TLS: {_USE_TLS}"
    if code == ER_ACCESS_DENIED:
        if tls.mode == "DISABLED":
            return (
                "the login was refused, on a connection without TLS (ssl-mode=DISABLED): "
                "the password is wrong, or the server takes TLS connections only (MariaDB "
                f"says the same for both): check the user and password, or {_USE_TLS}"
            )
        return f"the login was refused: check the user and password in {DSN}"
    if code == ER_DATABASE_ACCESS_DENIED:
        return f"the user may not use this database: grant it, or check the database in {DSN}"
    if code == CR_SSL_CONNECTION_ERROR and "doesn't support" in message:
        return (
            f"the server does not offer TLS and ssl-mode={tls.mode} requires it: turn TLS "
            f"on in the server (ssl_cert, ssl_key), or change ssl-mode in {DSN}"
        )
    if "CERTIFICATE_VERIFY_FAILED" in message:
        if "mismatch" in message:
            return (
                "the server's certificate does not name the host in the DSN: connect by "
                "a name it holds (ssl-mode=VERIFY_IDENTITY checks it), or give the server "
                "a certificate that names this host"
            )
        return (
            "this client does not trust the server's certificate: set ssl-ca in "
            f"{DSN} to the CA that signed it"
        )
    if code in (CR_CONN_HOST_ERROR, CR_SSL_CONNECTION_ERROR) and ("SSL" in message):
        return f"the TLS handshake failed: check ssl-mode, ssl-ca, ssl-cert and ssl-key in {DSN}"
    return None


def refusal(code: int | None, message: str, tls: MyTls) -> str | None:
    """What a refused connection means and what to check, in one line; None when it is
    no refusal (the server is down or unreachable, say)."""
    cause = _cause(code, message, tls)
    if cause is None:
        return None
    said = re.sub(r"\s+", " ", message).strip()
    return f"MariaDB/MySQL refused the connection: {cause} ({code}: {said[:300]})"
