"""TLS to MariaDB/MySQL, from the DSN's query string, with the names MySQL's own client
gives its options (`mysql --ssl-mode=VERIFY_IDENTITY --ssl-ca=...`, as MySQL Shell's
URIs and sqlx's DSNs spell them):

    mysql://user:password@host:3306/db?ssl-mode=VERIFY_IDENTITY&ssl-ca=/path/ca.pem

- `ssl-mode`: `DISABLED` (no TLS); `PREFERRED` (the driver's default; PyMySQL 1.2:
  TLS when the server offers it, its certificate not checked); `REQUIRED` (TLS or no
  connection, the certificate not checked); `VERIFY_CA` (TLS, the certificate signed
  by a trusted CA); `VERIFY_IDENTITY` (that, and the certificate names the DSN's host:
  recommended).
- `ssl-ca`: the CA (PEM) that signed the server's certificate; unset: the system's CAs.
- `ssl-cert`, `ssl-key`: this client's certificate and key (PEM), for a server that
  requires them; both or neither.

An `ssl-*` option without `ssl-mode` means `VERIFY_IDENTITY`, as pinledger's Kafka checks
the broker's name unless told not to. The names also take underscores (`ssl_mode`), as
MySQL's option files do; the mode any case. Anything else in the query string is an
error that names it: a DSN that says more than pinledger reads is refused, not half
obeyed.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pinledger.projections.store import StoreError

MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
OPTIONS = ("ssl-mode", "ssl-ca", "ssl-cert", "ssl-key")


@dataclass(frozen=True, slots=True)
class MyTls:
    """The DSN's TLS options; the mode is one of MODES, or "" when the DSN names none."""

    mode: str = ""
    ca: str = ""
    cert: str = ""
    key: str = ""

    @property
    def insists(self) -> bool:
        """Whether this client uses TLS or does not connect."""
        return self.mode in ("REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")


def _refused(message: str) -> StoreError:
    return StoreError(f"the MySQL DSN's query string: {message}")


def parse_tls(query: str) -> MyTls:
    """The TLS options of a DSN's query string (the part after `?`); StoreError naming
    the option when one is unknown, repeated or wrong."""
    found: dict[str, str] = {}
    for raw_name, value in parse_qsl(query, keep_blank_values=True):
        name = raw_name.lower().replace("_", "-")
        if name not in OPTIONS:
            raise _refused(f"unknown option {raw_name!r}: it takes {', '.join(OPTIONS)}")
        if name in found:
            raise _refused(f"{name} is given twice")
        if not value:
            raise _refused(f"{name} is empty")
        found[name] = value
    mode = found.get("ssl-mode", "").upper()
    if mode and mode not in MODES:
        raise _refused(f"ssl-mode={found['ssl-mode']}: expected one of {', '.join(MODES)}")
    tls = MyTls(
        mode=mode,
        ca=found.get("ssl-ca", ""),
        cert=found.get("ssl-cert", ""),
        key=found.get("ssl-key", ""),
    )
    if bool(tls.cert) != bool(tls.key):
        raise _refused("ssl-cert and ssl-key go together (this client's certificate and its key)")
    files = tls.ca or tls.cert
    if files and mode in ("DISABLED", "PREFERRED"):
        raise _refused(
            f"ssl-mode={mode} with ssl-ca or ssl-cert: certificates need ssl-mode=VERIFY_IDENTITY "
            "(or VERIFY_CA, REQUIRED)"
        )
    if files and not mode:
        tls = MyTls("VERIFY_IDENTITY", tls.ca, tls.cert, tls.key)
    return tls


def driver_args(tls: MyTls) -> dict[str, Any]:
    """PyMySQL's keyword arguments for these options: none when the DSN names none (or
    PREFERRED: the driver's default), `ssl_disabled`, or an `ssl` context (which makes
    PyMySQL refuse a server that does not offer TLS)."""
    if tls.mode in ("", "PREFERRED"):
        return {}
    if tls.mode == "DISABLED":
        return {"ssl_disabled": True}
    return {"ssl": context(tls)}


def context(tls: MyTls) -> ssl.SSLContext:
    """The TLS context of a mode that insists on TLS; StoreError naming the option whose
    file cannot be used."""
    try:
        ctx = ssl.create_default_context(cafile=tls.ca or None)
    except (OSError, ssl.SSLError) as exc:
        raise _refused(f"ssl-ca={tls.ca}: cannot use it as a CA file: {_reason(exc)}") from None
    if tls.mode == "REQUIRED":
        # Encrypted, not authenticated: MySQL's REQUIRED checks no certificate.
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = tls.mode == "VERIFY_IDENTITY"
        ctx.verify_mode = ssl.CERT_REQUIRED
    if tls.cert:
        try:
            ctx.load_cert_chain(tls.cert, tls.key)
        except (OSError, ssl.SSLError) as exc:
            raise _refused(
                f"ssl-cert={tls.cert}, ssl-key={tls.key}: cannot load this client's "
                f"certificate: {_reason(exc)}"
            ) from None
    return ctx


def _reason(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc)
    return exc.strerror or str(exc)
